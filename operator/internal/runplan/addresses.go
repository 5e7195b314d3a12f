package runplan

import (
	"maps"
	"slices"

	"daq.io/eventbuilder/operator/internal/builderapi"
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
// its pod had one, with the UID of the pod that had it.
type GivenAddresses struct {
	Epoch int64            `json:"epoch"`
	IPs   map[int32]string `json:"ips"`
	Pods  map[int32]string `json:"pods,omitempty"` // UIDs; a record written before they were kept has none
}

// Give records ips, the pod IPs sent with the table of epoch now, and the
// UIDs of their pods (uids, by rank), and returns the record to keep and
// whether it changed. A new epoch starts a new record; within one, a
// rank's first IP and pod stay (builders configured with it still dial
// it) and ranks seen for the first time are added.
func (g GivenAddresses) Give(epoch int64, ips, uids map[int32]string) (GivenAddresses, bool) {
	fresh := g.Epoch != epoch || g.IPs == nil
	out := GivenAddresses{Epoch: epoch, IPs: map[int32]string{}, Pods: map[int32]string{}}
	if !fresh {
		maps.Copy(out.IPs, g.IPs)
		maps.Copy(out.Pods, g.Pods)
	}
	changed := g.Epoch != epoch
	for rank, ip := range ips {
		if _, known := out.IPs[rank]; !known {
			out.IPs[rank], out.Pods[rank], changed = ip, uids[rank], true
		}
	}
	return out, changed
}

// MovedAddresses finds the live ranks of t whose builder answers (it is in
// reports) from a pod IP (ips) other than the one the builders of t's
// epoch were given for it, the pod being the same (uids, by rank: its
// sandbox was recreated). A pod replaced by another (deleted, evicted) is
// not moved: its builder's peers lost the old one, and their report fails
// it over or rejoins it; taken for moved, a replacement that answered
// before that loss was polled was taken back in place of a failover.
// Spares are dummies in the table, which no peer dials: their address
// matters once a failover makes them live, and that epoch carries it.
// Ranks in order.
func MovedAddresses(t planner.RankTable, given GivenAddresses, ips, uids map[int32]string, reports map[int32]builderapi.Report) []int {
	if given.Epoch != t.Epoch {
		return nil
	}
	var out []int
	for _, r := range t.Ranks {
		rank := int32(r.Rank)
		old, known := given.IPs[rank]
		ip, running := ips[rank]
		_, answers := reports[rank]
		replaced := given.Pods[rank] != "" && given.Pods[rank] != uids[rank]
		if r.Role == planner.Live && known && running && answers && ip != old && !replaced {
			out = append(out, r.Rank)
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
