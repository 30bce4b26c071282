package server

// MarshalMsg marshals a response as the server's gRPC codec does, for tests
// that fake a stream.
func MarshalMsg(m any) ([]byte, error) {
	b, err := newCodec().Marshal(m)
	if err != nil {
		return nil, err
	}
	defer b.Free()
	return b.Materialize(), nil
}
