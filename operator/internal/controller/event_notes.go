package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"daq.io/eventbuilder/operator/internal/shortlist"
)

// maxEventNote is the longest note the API server takes in an Event: a
// longer one is refused ("can have at most 1024 characters") and the
// event lost. At farm size a list of unread streams or lost units is
// longer (make bench-farm found it).
const maxEventNote = 1024

// boundedEvents cuts every event's note to what the API server takes;
// the whole text stays in the condition or status it came from.
type boundedEvents struct{ events.EventRecorder }

// withBoundedNotes wraps r, once.
func withBoundedNotes(r events.EventRecorder) events.EventRecorder {
	if _, ok := r.(boundedEvents); ok || r == nil {
		return r
	}
	return boundedEvents{r}
}

func (b boundedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	if len(note) > maxEventNote {
		note = shortlist.Clip(note, maxEventNote-len("..."))
	}
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", note)
}
