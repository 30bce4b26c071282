package ctl

// Explain, EventError, Match and SplitFields are explain, eventError, match
// and splitFields, for tests.
var (
	Explain     = explain
	EventError  = eventError
	Match       = match
	SplitFields = splitFields
)
