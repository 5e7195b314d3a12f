#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schedule/rank_table.hpp"

namespace eb::sim {

// The switches of a Fabric (operator/api/v1alpha1, Fabric.spec): leaves,
// spines, server ports per leaf, links per leaf-spine pair, and the rule
// that picks the spine towards a destination port.
struct Fabric_shape {
    int leaves = 0;
    int spines = 0;
    int ports_per_leaf = 0;
    int links_per_pair = 0;
    std::string routing = "PortModSpines";  // or LeafPortModSpines

    // The spine that carries traffic to (leaf, port), as the operator's
    // planner routes it (planner.Fabric.spine).
    int spine(int leaf, int port) const;
};

// One rank of the operator's rank table, as far as the network is
// concerned: what it runs and the switch port it is cabled to.
struct Farm_rank {
    Rank_function function = Rank_function::dummy;
    int leaf = 0;
    int port = 0;
};

// A run as the operator plans it: the fabric and the rank table. The
// simulator never plans: this comes from eb-plan (the operator's planner)
// or from a rank table the operator published.
struct Farm_plan {
    Fabric_shape fabric;
    std::vector<Farm_rank> ranks;

    // The schedule's view of the table: who runs an RU, a BU, or nothing.
    Rank_table schedule() const;
    int live() const { return static_cast<int>(schedule().live_ranks().size()); }
};

// A self-configured set of `units` folded ranks on one switch (eb-builder
// --peers with no table: flag_functions), as the units of one machine on
// its loopback device: the platform the model is calibrated on.
Farm_plan one_switch_plan(int units);

// Reads eb-plan's output ({"fabric": {...}, "table": {...}}).
Farm_plan read_plan(const nlohmann::json& plan);
// Reads a rank table the operator published (the ConfigMap's ranks.json)
// on a fabric of this shape.
Farm_plan read_table(const nlohmann::json& table, const Fabric_shape& fabric);

}  // namespace eb::sim
