package daemon

// WithClusterUID is withClusterUID, for the tests of package daemon_test.
var WithClusterUID = withClusterUID
