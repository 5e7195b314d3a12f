package planner

import (
	"errors"
	"fmt"
)

// FieldError is one problem in a Fabric or Request: the field at fault,
// what is wrong with it, and how to fix it. Validate joins them with
// errors.Join, so a user sees every problem at once; errors.As finds the
// first.
type FieldError struct {
	Field   string // e.g. "endpoints[3].port"
	Problem string
	Fix     string
}

func (e *FieldError) Error() string {
	return e.Field + ": " + e.Problem + "; fix: " + e.Fix
}

func fieldErr(field, fix, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...), Fix: fix}
}

// Validate reports every problem in the fabric: zero counts, an unknown
// routing rule, and endpoints that are unnamed, duplicated, cabled outside
// the switches or onto a port another endpoint already uses.
func (f Fabric) Validate() error {
	errs := f.validateShape()
	if len(f.Endpoints) == 0 {
		errs = append(errs, fieldErr("endpoints", "list the server NUMA domains and where they are cabled", "no endpoints"))
	}
	if len(errs) > 0 {
		// Range checks on endpoints mean nothing without valid counts.
		return errors.Join(errs...)
	}
	byName := map[string]int{}
	type numaKey struct {
		node string
		numa int
	}
	byNUMA := map[numaKey]int{}
	byPort := map[[2]int]int{}
	byStream := map[string]int{}
	for i, ep := range f.Endpoints {
		at := fmt.Sprintf("endpoints[%d]", i)
		if ep.Name == "" {
			errs = append(errs, fieldErr(at+".name", "give every endpoint a unique name", "empty"))
		} else if j, dup := byName[ep.Name]; dup {
			errs = append(errs, fieldErr(at+".name", "rename one of them", "%q is also the name of endpoints[%d]", ep.Name, j))
		} else {
			byName[ep.Name] = i
		}
		if ep.Node == "" {
			errs = append(errs, fieldErr(at+".node", "set the Kubernetes node of the server", "endpoint %q has no node", ep.Name))
		}
		if ep.NUMA < 0 {
			errs = append(errs, fieldErr(at+".numa", "use the NUMA node id the server reports (0, 1, ...)", "endpoint %q has NUMA id %d", ep.Name, ep.NUMA))
		} else if j, dup := byNUMA[numaKey{ep.Node, ep.NUMA}]; dup && ep.Node != "" {
			errs = append(errs, fieldErr(at+".numa", "each NUMA domain is one endpoint; correct the NUMA id or the node", "endpoint %q and endpoints[%d] are both node %q NUMA %d", ep.Name, j, ep.Node, ep.NUMA))
		} else {
			byNUMA[numaKey{ep.Node, ep.NUMA}] = i
		}
		leafOK := ep.Leaf >= 0 && ep.Leaf < f.Leaves
		portOK := ep.Port >= 0 && ep.Port < f.PortsPerLeaf
		if !leafOK {
			errs = append(errs, fieldErr(at+".leaf", fmt.Sprintf("leaves are numbered 0..%d: correct the cabling entry or raise leaves", f.Leaves-1), "endpoint %q is cabled to leaf %d", ep.Name, ep.Leaf))
		}
		if !portOK {
			errs = append(errs, fieldErr(at+".port", fmt.Sprintf("server ports are numbered 0..%d on each leaf: correct the cabling entry or raise portsPerLeaf", f.PortsPerLeaf-1), "endpoint %q is cabled to port %d", ep.Name, ep.Port))
		}
		if leafOK && portOK {
			if j, dup := byPort[[2]int{ep.Leaf, ep.Port}]; dup {
				errs = append(errs, fieldErr(at+".port", "one of the two cabling entries is wrong; correct it", "endpoint %q is cabled to leaf %d port %d, as is endpoints[%d]", ep.Name, ep.Leaf, ep.Port, j))
			} else {
				byPort[[2]int{ep.Leaf, ep.Port}] = i
			}
		}
		for _, s := range ep.Streams {
			if j, dup := byStream[s]; dup && j != i {
				errs = append(errs, fieldErr(at+".streams", "a readout stream reaches one server; list it on one endpoint only", "stream %q of endpoint %q is also listed on endpoints[%d]", s, ep.Name, j))
			} else {
				byStream[s] = i
			}
		}
	}
	return errors.Join(errs...)
}

// validateFor checks the fabric as Plan does and that it still describes
// the table: what Failover, MoveBU and DropUnit need before they change it.
func (f Fabric) validateFor(t RankTable) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("invalid fabric: %w", err)
	}
	if err := f.describes(t); err != nil {
		return fmt.Errorf("the fabric does not describe the table at epoch %d: %w", t.Epoch, err)
	}
	return nil
}

// describes reports every rank of t the fabric contradicts: on a switch
// port it does not have, or running an endpoint it does not list or lists
// on another port. A table holds for the cabling it was planned on; on
// any other, a move would put a unit where its endpoint is not, and check
// links it does not use.
func (f Fabric) describes(t RankTable) error {
	const replan = "a table holds for the cabling it was planned on: plan the run again, or correct the entry"
	at := map[string]int{}
	for i, ep := range f.Endpoints {
		at[ep.Name] = i
	}
	var errs []error
	for _, r := range t.Ranks {
		switch i, listed := at[r.Endpoint]; {
		case r.Leaf < 0 || r.Leaf >= f.Leaves:
			errs = append(errs, fieldErr("leaves", replan, "rank %d is on leaf %d; the fabric has %d", r.Rank, r.Leaf, f.Leaves))
		case r.Port < 0 || r.Port >= f.PortsPerLeaf:
			errs = append(errs, fieldErr("portsPerLeaf", replan, "rank %d is on port %d; the fabric has %d per leaf", r.Rank, r.Port, f.PortsPerLeaf))
		case r.Endpoint == "":
		case !listed:
			errs = append(errs, fieldErr("endpoints", "list it again (a failed server stays listed, its node not Ready), or plan the run again without it",
				"rank %d runs endpoint %q, which is not listed", r.Rank, r.Endpoint))
		case f.Endpoints[i].Leaf != r.Leaf || f.Endpoints[i].Port != r.Port:
			field := "port"
			if f.Endpoints[i].Leaf != r.Leaf {
				field = "leaf"
			}
			errs = append(errs, fieldErr(fmt.Sprintf("endpoints[%d].%s", i, field), replan, "endpoint %q is cabled to leaf %d port %d, but rank %d runs it on leaf %d port %d",
				r.Endpoint, f.Endpoints[i].Leaf, f.Endpoints[i].Port, r.Rank, r.Leaf, r.Port))
		}
	}
	return errors.Join(errs...)
}

// validateShape checks the switch counts and the routing rule: what
// CheckLinkLoad needs, without the endpoints.
func (f Fabric) validateShape() []error {
	var errs []error
	for _, c := range []struct {
		field string
		n     int
	}{{"leaves", f.Leaves}, {"spines", f.Spines}, {"portsPerLeaf", f.PortsPerLeaf}, {"linksPerPair", f.LinksPerPair}} {
		if c.n < 1 {
			errs = append(errs, fieldErr(c.field, "set it to at least 1, as cabled", "is %d", c.n))
		}
	}
	switch f.Routing {
	case "", RoutingPortModSpines, RoutingLeafPortModSpines:
	default:
		errs = append(errs, fieldErr("routing", "use "+string(RoutingPortModSpines)+" or "+string(RoutingLeafPortModSpines), "unknown rule %q", f.Routing))
	}
	return errs
}

// Validate reports every problem in the request.
func (r Request) Validate() error {
	var errs []error
	if r.Units < 1 {
		errs = append(errs, fieldErr("units", "ask for at least 1 unit", "is %d", r.Units))
	}
	if r.Spares < 0 {
		errs = append(errs, fieldErr("spares", "use 0 for no warm spares", "is %d", r.Spares))
	}
	switch r.Layout {
	case "", Folded, Unfolded:
	default:
		errs = append(errs, fieldErr("layout", "use "+string(Folded)+" or "+string(Unfolded), "unknown layout %q", r.Layout))
	}
	return errors.Join(errs...)
}
