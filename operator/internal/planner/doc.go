// Package planner decides, for an event-building run on a fat-tree fabric,
// which endpoint runs which rank of the linear-shifting schedule, which
// ranks are dummies and spares, and how a failed unit moves to a spare. It
// is pure: plain Go types in, plain Go types out, no Kubernetes client; the
// reconciler maps the Fabric and EventBuilderRun resources onto Fabric and
// Request and the returned RankTable onto pods and status.
//
// The schedule. With N ranks, in phase n rank i sends to rank (n+i) mod N,
// so every rank sends to one rank and receives from one rank per phase
// (section II-A of the LHCb Run 3 event-builder paper). The switches route a
// flow up to spine S(p) = p mod Spines, p being the destination's global
// port Leaf*PortsPerLeaf+Port (RoutingPortModSpines, the paper's equation
// 1), and down to the destination's leaf.
//
// Ranks. Plan uses the fewest leaves that hold the endpoints it needs (the
// "leaves in use"), numbers them 0, 1, ... in ascending leaf order, and
// gives port p of the i-th leaf in use rank i*PortsPerLeaf+p. N is
// therefore every server-facing port of the leaves in use; where some port
// columns have no live or spare endpoint on any leaf in use, Plan drops
// them (port ports[j] of the i-th leaf is then rank i*len(ports)+j, the
// same permutation on every leaf) when that table plays without an
// overload, since each dummy costs a phase. Every leaf uses
// the same port order, which is what keeps links free of conflicts: the
// PortsPerLeaf senders of a leaf send, in any phase, to PortsPerLeaf
// consecutive ranks, which sit on PortsPerLeaf distinct port numbers and
// so spread evenly over the spines; and the ports of a leaf receive from
// one sender each, again spread evenly. No link then carries more than
// ceil(PortsPerLeaf/Spines) flows, which fits when that is at most
// LinksPerPair (LHCb: 20 ports, 10 spines, 2 links). The argument holds
// when the spine depends only on the destination's port number on its
// leaf: true of RoutingPortModSpines when PortsPerLeaf is a multiple of
// Spines (the paper's fabrics), and always of RoutingLeafPortModSpines
// (spine = Port mod Spines). CheckLinkLoad verifies any table
// by playing every phase; Plan refuses a fabric whose table would overload
// a link (ErrLinkOverload, naming the phase, the link, the cause and its
// fixes), and Failover never adds an overload. Plan also refuses spares
// that no unit could move to without an overload (ErrLinkOverload, with a
// FieldError on spares): a spare that can never be used would hide that
// the run has none. A spare that fits some units but not others is kept,
// and Failover passes over it for the others (ErrSpareWouldConflict).
//
// Dummies. A rank whose port has no live unit (nothing cabled, node not
// schedulable, endpoint idle or failed, or a warm spare) is a dummy: it
// keeps the schedule in step and moves no data. Endpoints whose node is
// unknown or not Ready are listed in RankTable.Unschedulable, never dropped
// silently.
//
// Readout is physical. An endpoint's streams are fibres into its readout
// cards: read only while it runs an RU, never moved by a plan. Plan keeps
// as many streams read as the run has units for (the leaves in use hold
// enough endpoints with streams; spares and idle endpoints come from those
// without, as a farm keeps its spare servers without fibres), and
// UnreadStreams names the endpoints whose streams no RU reads, and why.
//
// Live, spare, idle. Spares are taken first, whole servers at a time
// (both NUMA halves together), round-robin over the leaves in use, from
// the fullest leaf and its highest ports first, so they sit on as many
// leaves as possible. Endpoints the run does not need are left idle by the
// same rule, and the rest go live, units numbered in rank order. The
// choice depends only on the fabric, not on the order endpoints are listed.
// Unfolded runs take two endpoints per unit: the RUs on the live
// endpoints that read streams, the BUs on the rest (see Unfolded).
//
// Failover. A unit is its UnitID: its place in the event stream and its
// output. When a live rank fails, Failover makes it a dummy and gives its
// unit to a spare rank, which goes live (reading the spare's own streams,
// if it has any: the failed endpoint's stay unread until the Fabric shows
// them cabled elsewhere; an RU alone takes only a spare with fibres, and
// a BU that builds without its unit's stream is marked SourceUnread
// wherever it moves); the epoch goes up by one so that all
// builders switch tables at the same phase boundary. The spare is the
// lowest-ranked schedulable one on another server and, where one is left,
// another leaf than the failed rank's (the failure domains: a server, all
// its NUMA endpoints, and a leaf, which a failure seen only as lost peers
// may be), that adds no link overload. The table keeps no history, so
// Failover reads the traces earlier moves leave in it, the vacated
// endpoints: a server that lost its other half sends this one to a spare
// server that runs no unit where one is usable, so that one spare server
// does not hold both units of a failed server. With no spare left it
// returns ErrNoSpare, naming the spares passed over and why, and the
// caller applies the run's failure policy.
//
// Failover does not guess from the table that a leaf is lost: it never
// refuses a leaf's spares because of the units that leaf lost. A whole
// server lost (builders unreachable, its node still Ready) loses both its
// NUMA units on one leaf, which the run fails over one after the other;
// a leaf lost while its nodes stay Ready leaves the same traces. Shunning
// a leaf after two such losses would drop, instead of moving, the second
// unit of the most common failure wherever the spares share the failed
// server's leaf (every one-leaf farm), to guard against a rarer one.
// Spares on another leaf are preferred all the same; whoever knows a leaf
// is lost lists it in the Fabric's spec.unavailableLeaves, and the caller
// (runplan.Fabric) marks its endpoints not schedulable.
//
// A table holds for the cabling it was planned on. Failover, MoveBU and
// DropUnit refuse, as Plan does, a Fabric that is invalid, and one that no
// longer describes the table (a rank's endpoint unlisted, or cabled to
// another port): a move would put a unit on a port its endpoint has left,
// or take the failed endpoint's server for unknown. The error names the
// Fabric field and the fix (plan the run again, or correct the entry).
package planner
