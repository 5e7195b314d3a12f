package runplan

import (
	"maps"
	"slices"

	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/planner"
)

// Addresses: builders dial their peers at the pod IPs the operator gave
// them with the epoch's table. A pod that gets another IP while keeping
// its rank (its sandbox recreated: its node restarted) leaves the builders
// configured before the change dialling the old address, connecting for
// ever, while none of them reports it lost. A new epoch of the same table,
// with the addresses as they are, takes it back.

// ReasonAddressChanged is the reason of a rank taken back at a new epoch
// because its pod answers from another IP than its peers were given.
const ReasonAddressChanged = "AddressChanged"

// GivenAddresses is the record of the pod IPs by rank that the builders
// of an epoch were given: those first sent for it, each rank's as soon as
// its pod had one.
type GivenAddresses struct {
	Epoch int64            `json:"epoch"`
	IPs   map[int32]string `json:"ips"`
}

// Give records ips, the pod IPs sent with the table of epoch now, and
// returns the record to keep and whether it changed. A new epoch starts a
// new record; within one, a rank's first IP stays (builders configured
// with it still dial it) and ranks seen for the first time are added.
func (g GivenAddresses) Give(epoch int64, ips map[int32]string) (GivenAddresses, bool) {
	if g.Epoch != epoch || g.IPs == nil {
		return GivenAddresses{Epoch: epoch, IPs: maps.Clone(ips)}, len(ips) > 0 || g.Epoch != epoch
	}
	out := GivenAddresses{Epoch: epoch, IPs: maps.Clone(g.IPs)}
	changed := false
	for rank, ip := range ips {
		if _, known := out.IPs[rank]; !known {
			out.IPs[rank], changed = ip, true
		}
	}
	return out, changed
}

// MovedAddresses finds the live ranks of t whose builder answers (it is in
// reports) from a pod IP (ips) other than the one the builders of t's
// epoch were given for it. Spares are dummies in the table, which no peer
// dials: their address matters once a failover makes them live, and that
// epoch carries it. Ranks in order.
func MovedAddresses(t planner.RankTable, given GivenAddresses, ips map[int32]string, reports map[int32]builderstatus.Report) []int {
	if given.Epoch != t.Epoch {
		return nil
	}
	var out []int
	for _, r := range t.Ranks {
		rank := int32(r.Rank)
		old, known := given.IPs[rank]
		ip, running := ips[rank]
		_, answers := reports[rank]
		if r.Role == planner.Live && known && running && answers && ip != old {
			out = append(out, r.Rank)
		}
	}
	return out
}

// ReportsOfPods keeps the reports of poll that came from the pods the
// ranks have now (uids: their UIDs, by rank). A report polled from a pod
// since deleted says nothing of the pod that replaced it: taken for the
// successor's, it made a unit whose pod was deleted look moved (its new
// pod running at a new IP, "answering" by its predecessor's report) before
// its peers' loss of it was polled, and the rank was taken back instead of
// failed over.
func ReportsOfPods(poll *builderstatus.Poll, uids map[int32]string) map[int32]builderstatus.Report {
	out := map[int32]builderstatus.Report{}
	for rank, report := range poll.Reports {
		if uid, ok := uids[rank]; ok && uid != "" && poll.Pods[rank] == uid {
			out[rank] = report
		}
	}
	return out
}

// Readdress is the recovery of ranks whose address moved (MovedAddresses):
// the same table at the next epoch, every rank where it was, outcome
// Rejoined. Configured on every builder, with the addresses as they are.
func Readdress(t planner.RankTable, ranks []int) Recovery {
	return retake(t, slices.Sorted(slices.Values(ranks)), ReasonAddressChanged)
}
