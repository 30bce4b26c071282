package indexer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
)

// ErrBadContinue: a continue token informerd did not issue.
var ErrBadContinue = errors.New("indexer: not a continue token informerd issued")

// Continue is where a paged List stands: the resourceVersion of the
// snapshot its first page read (ViewAt finds it again) and the last key
// sent. Its encoding is the continue token of every serving layer, so a
// list continues on another replica while the snapshot is in that
// replica's history.
type Continue struct {
	RV      string `json:"rv"`
	LastKey string `json:"k"`
	// Issued, when set, is when the first page was read (Unix seconds):
	// the Kubernetes API layer expires its tokens as the API server's
	// etcd compaction does.
	Issued int64 `json:"t,omitempty"`
}

// Encode returns c as a continue token.
func (c Continue) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseContinue decodes a continue token Encode made, or returns
// ErrBadContinue.
func ParseContinue(token string) (Continue, error) {
	var c Continue
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.RV == "" {
		return Continue{}, ErrBadContinue
	}
	return c, nil
}
