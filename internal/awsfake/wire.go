package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// Error is an AWS error answer.
type Error struct {
	// Status is the HTTP status code (400 for client errors).
	Status int
	// Code is the AWS error code, e.g. InvalidInstanceID.NotFound.
	Code string
	// Message is the human-readable message.
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorf returns a 400 error with code and a formatted message.
func errorf(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ec2ErrorBody is EC2's error document.
type ec2ErrorBody struct {
	XMLName xml.Name `xml:"Response"`
	Errors  struct {
		Error struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	} `xml:"Errors"`
	RequestID string `xml:"RequestID"`
}

// queryErrorBody is the awsquery (ELBv2, STS) error document.
type queryErrorBody struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

// writeError writes e in the format of the API named by version. EC2
// signals throttling with RequestLimitExceeded and 503, ELBv2 and STS with
// Throttling and 400, as the real services do.
func writeError(w http.ResponseWriter, version string, e *Error) {
	if version == ec2Version {
		b := ec2ErrorBody{RequestID: "fake-request"}
		b.Errors.Error.Code, b.Errors.Error.Message = e.Code, e.Message
		status := e.Status
		if e.Code == "Throttling" {
			b.Errors.Error.Code, status = "RequestLimitExceeded", http.StatusServiceUnavailable
		}
		writeStatusXML(w, status, b)
		return
	}
	b := queryErrorBody{RequestID: "fake-request"}
	b.Error.Type, b.Error.Code, b.Error.Message = "Sender", e.Code, e.Message
	if e.Status >= 500 {
		b.Error.Type = "Receiver"
	}
	writeStatusXML(w, e.Status, b)
}

func writeXML(w http.ResponseWriter, body any) {
	writeStatusXML(w, http.StatusOK, body)
}

func writeStatusXML(w http.ResponseWriter, status int, body any) {
	out, err := xml.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// xmlTag is an EC2 tag item.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

// ec2Tags renders a tag map as an EC2 tagSet.
func ec2Tags(tags map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

// memberTag is an ELBv2 tag member.
type memberTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

func elbTags(tags map[string]string) []memberTag {
	out := make([]memberTag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, memberTag{Key: k, Value: tags[k]})
	}
	return out
}
