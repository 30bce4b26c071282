package ctl

// Explain, EventError and Match are explain, eventError and match, for
// tests.
var (
	Explain    = explain
	EventError = eventError
	Match      = match
)
