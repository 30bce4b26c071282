package kubeapi

import (
	"bytes"
	"net/http"

	"sigs.k8s.io/yaml"
)

// yamlWriter buffers a get's or list's JSON answer and writes it as YAML
// (application/yaml), as the API server answers a client that accepts
// YAML only (kubectl's --output yaml asks for JSON and converts itself).
type yamlWriter struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (y *yamlWriter) WriteHeader(code int)        { y.code = code }
func (y *yamlWriter) Write(b []byte) (int, error) { return y.body.Write(b) }

// finish converts what was written and sends it.
func (y *yamlWriter) finish() {
	if y.code == 0 {
		y.code = http.StatusOK
	}
	out, err := yaml.JSONToYAML(y.body.Bytes())
	if err != nil {
		y.ResponseWriter.WriteHeader(y.code)
		_, _ = y.ResponseWriter.Write(y.body.Bytes())
		return
	}
	y.Header().Set("Content-Type", "application/yaml")
	y.ResponseWriter.WriteHeader(y.code)
	_, _ = y.ResponseWriter.Write(out)
}
