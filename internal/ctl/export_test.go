package ctl

// Explain is explain, for tests.
var Explain = explain
