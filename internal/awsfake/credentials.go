package awsfake

import "net/http"

// SetAccessKeys makes the fake accept requests signed with these access key
// IDs only, as AWS does once a key is deactivated; other requests fail with
// AuthFailure (EC2) or InvalidClientTokenId (ELBv2, STS), HTTP 401. No keys:
// every key is accepted (the default).
func (s *Server) SetAccessKeys(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.validKeys = nil
	if len(keys) > 0 {
		s.validKeys = map[string]bool{}
		for _, k := range keys {
			s.validKeys[k] = true
		}
	}
}

// Rejected returns how many requests were refused for their access key.
func (s *Server) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// authError refuses a key SetAccessKeys did not list. s.mu is held.
func (s *Server) authError(key, version string) *Error {
	if s.validKeys == nil || key == "" || s.validKeys[key] {
		return nil
	}
	s.rejected++
	code := "InvalidClientTokenId"
	if version == ec2Version {
		code = "AuthFailure"
	}
	return &Error{Status: http.StatusUnauthorized, Code: code, Message: "The security token included in the request is invalid (the access key is not active)"}
}
