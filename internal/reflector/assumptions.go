package reflector

// informerd's ingest reads a watch on its own goroutine and stores most of
// its changes itself (stream.go), while client-go's Reflector keeps the
// list/watch protocol. That hand-over rests on how client-go's Reflector
// behaves, not only on what it documents: the loop that reads a watch
// (handleAnyWatch), the streaming list (watchList) and the very-short-watch
// rule are unexported. Each behaviour relied on is named here once, with
// what breaks without it and the test that drives client-go's own
// cache.Reflector to check it (assumptions_test.go). A client-go upgrade
// that changes one fails its test; an upgrade of the minor version also
// fails TestAssumptionsVerifiedVersion until someone has re-read client-go
// and moved assumptionsVerifiedAgainst (docs/architecture.md, "What a
// client-go upgrade must re-verify").

// assumptionsVerifiedAgainst is the client-go minor version whose
// Reflector the assumptions were last read against.
const assumptionsVerifiedAgainst = "v0.37"

// assumption is one behaviour of client-go's Reflector that informerd
// relies on.
type assumption struct {
	// name is how docs and tests refer to it.
	name string
	// behaviour is what client-go's Reflector does.
	behaviour string
	// why is what goes wrong in informerd if it stops doing so.
	why string
	// where names the code that relies on it.
	where []string
	// test is the test that checks it against client-go's Reflector.
	test string
}

// assumptions are every behaviour of client-go's Reflector informerd's
// ingest relies on beyond its documented API.
var assumptions = []assumption{
	{
		name: "stops a watch only after an ERROR, a closed channel or a cancelled context",
		behaviour: "handleAnyWatch reads a watch until its result channel closes, it sends an ERROR event or the " +
			"context ends; it stops the watch then, and never otherwise: not when the watch is idle for any " +
			"time, not when the store returns an error (it logs it and goes on after the event). Nothing " +
			"after an ERROR is read.",
		why: "A streamWatch applies events itself while the Reflector waits on its channel, and tells it how " +
			"far it applied only when the watch ends (catchUp). A watch the Reflector stops is over for it: " +
			"the streamWatch returns without that bookmark, so if the Reflector stopped one for another " +
			"reason (an idle watch, say) it would watch again from before what was applied, and apply it " +
			"twice (TestRealReflectorRandomized fails so). It applies nothing after an ERROR, which ends the " +
			"Reflector's reading; it closes idle connections itself (streamIdle) because the Reflector does " +
			"not; and a change the store could not queue ends the watch with a 410 (gap), because the " +
			"Reflector would go on after it.",
		where: []string{"stream.go: streamWatch.loop, catchUp, streamIdle", "watch.go: observedWatch", "gap.go", "store.go: store.change"},
		test:  "TestAssumptionWatchStopsOnlyOnErrorCloseOrCancel",
	},
	{
		name: "a streaming list calls Replace once and goes on with the same watch",
		behaviour: "watchList opens a watch with SendInitialEvents=true, gathers its events up to the bookmark " +
			"annotated k8s.io/initial-events-end in a store of its own (never the Reflector's store), calls " +
			"the store's Replace exactly once with them at the bookmark's resourceVersion, and then reads " +
			"the same watch, without opening another, list or watch.",
		why: "Run recognizes a streaming list by SendInitialEvents and gives its watch a listSignal that " +
			"only the store's next Replace tells; after the initial events the watch applies nothing until " +
			"then. Without that Replace (initial events stored one by one, say) the watch would wait and " +
			"apply nothing more. A Reflector that opened another watch instead of reading this one would " +
			"only cost a watch: the first ends when stopped.",
		where: []string{"reflector.go: Run (streamingList, hooks.listed)", "store.go: store.Replace (listed)", "stream.go: waitListed"},
		test:  "TestAssumptionStreamingListReplacesOnceOnTheSameWatch",
	},
	{
		name: "a bookmark moves the resourceVersion the Reflector resumes from",
		behaviour: "Every event handleAnyWatch reads, a bookmark included, sets lastSyncResourceVersion to its " +
			"resourceVersion, and the store's Bookmark is called with it; the next watch starts from it, " +
			"and after a 410 the next list (or streaming list) asks for data no older than it. A store's " +
			"error does not hold it back.",
		why: "A streamWatch tells the Reflector how far it applied with one bookmark (caughtUpTo) before the " +
			"watch ends; without it the Reflector would watch again from before the events the watch " +
			"applied (duplicates) or list older than the cache (backwards). The store skips that bookmark " +
			"by its resourceVersion.",
		where: []string{"reflector.go: caughtUpTo", "stream.go: catchUp, endMissed", "store.go: store.Bookmark"},
		test:  "TestAssumptionBookmarkMovesResumePoint",
	},
	{
		name: "a very short watch is one without events",
		behaviour: "handleAnyWatch returns VeryShortWatchError, and the Reflector backs off and lists again, " +
			"only when a watch closed within a second of its start having delivered no event at all; any " +
			"event, a bookmark included, counts.",
		why: "A streamWatch that applied every event itself hands the Reflector a single bookmark; if that " +
			"did not count, a watch the API server closes soon after would cost a backoff and a full " +
			"relist. informerd reports an empty watch (onEmpty) by the same rule.",
		where: []string{"stream.go: streamWatch.loop (onEmpty, catchUp)", "watch.go: observedWatch.loop (onEmpty)"},
		test:  "TestAssumptionVeryShortWatchCountsEvents",
	},
}
