package server

import "time"

// Defaults of Options and GRPCOptions. informerd's flags, the constructors
// and docs/configuration.md all take them from here.
const (
	DefaultPageSize                = 500
	DefaultMaxPageSize             = 5000
	DefaultMaxPageBytes            = 3 << 20
	DefaultMaxWatches              = 10000
	DefaultRecheckInterval         = time.Second
	DefaultMaxRequestBytes         = 1 << 20
	DefaultMaxStreamsPerConnection = 1000
	DefaultKeepaliveTime           = 2 * time.Minute
	DefaultKeepaliveTimeout        = 20 * time.Second
)
