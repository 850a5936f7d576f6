package awsfake

import (
	"encoding/xml"
	"net/url"
	"time"
)

type stsResponse struct {
	XMLName  xml.Name
	Xmlns    string `xml:"xmlns,attr"`
	Result   namedResult
	Metadata struct {
		RequestID string `xml:"RequestId"`
	} `xml:"ResponseMetadata"`
}

type assumeRoleResult struct {
	Credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	} `xml:"Credentials"`
	AssumedRoleUser struct {
		Arn           string `xml:"Arn"`
		AssumedRoleID string `xml:"AssumedRoleId"`
	} `xml:"AssumedRoleUser"`
}

type callerIdentityResult struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

// sts answers AssumeRole and AssumeRoleWithWebIdentity (any role, fixed
// temporary credentials: access key ASIAFAKE and ASIAWEBIDENTITY) and
// GetCallerIdentity.
func (s *Server) sts(action string, f url.Values) (any, *Error) {
	var body any
	switch action {
	case "AssumeRole":
		if f.Get("RoleArn") == "" || f.Get("RoleSessionName") == "" {
			return nil, errorf("ValidationError", "RoleArn and RoleSessionName are required")
		}
		var r assumeRoleResult
		r.Credentials.AccessKeyID, r.Credentials.SecretAccessKey, r.Credentials.SessionToken = "ASIAFAKE", "fake-secret", "fake-session"
		r.Credentials.Expiration = time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z")
		r.AssumedRoleUser.Arn, r.AssumedRoleUser.AssumedRoleID = f.Get("RoleArn")+"/"+f.Get("RoleSessionName"), "AROAFAKE:"+f.Get("RoleSessionName")
		body = r
	case "AssumeRoleWithWebIdentity":
		if f.Get("RoleArn") == "" || f.Get("RoleSessionName") == "" || f.Get("WebIdentityToken") == "" {
			return nil, errorf("ValidationError", "RoleArn, RoleSessionName and WebIdentityToken are required")
		}
		var r assumeRoleResult
		r.Credentials.AccessKeyID, r.Credentials.SecretAccessKey, r.Credentials.SessionToken = "ASIAWEBIDENTITY", "fake-secret", "fake-session"
		r.Credentials.Expiration = time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z")
		r.AssumedRoleUser.Arn, r.AssumedRoleUser.AssumedRoleID = f.Get("RoleArn")+"/"+f.Get("RoleSessionName"), "AROAFAKE:"+f.Get("RoleSessionName")
		body = r
	case "GetCallerIdentity":
		body = callerIdentityResult{Arn: "arn:aws:iam::" + Account + ":user/fake", UserID: "AIDAFAKE", Account: Account}
	default:
		return nil, errorf("InvalidAction", "Could not find operation %s", action)
	}
	r := stsResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: "https://sts.amazonaws.com/doc/2011-06-15/"}
	r.Result = namedResult{XMLName: xml.Name{Local: action + "Result"}, Body: body}
	r.Metadata.RequestID = "fake"
	return r, nil
}
