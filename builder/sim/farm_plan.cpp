#include "farm_plan.hpp"

#include <stdexcept>

namespace eb::sim {
namespace {

Rank_function function_of(const nlohmann::json& rank) {
    const std::string state = rank.at("state").get<std::string>();
    if (state == "dummy") return Rank_function::dummy;
    if (state != "live") throw std::invalid_argument("rank table: state \"" + state + "\" (live or dummy expected)");
    const std::string function = rank.value("function", std::string("RU+BU"));
    if (function == "RU+BU") return Rank_function::ru_bu;
    if (function == "RU") return Rank_function::ru;
    if (function == "BU") return Rank_function::bu;
    throw std::invalid_argument("rank table: function \"" + function + "\" (RU+BU, RU or BU expected)");
}

}  // namespace

int Fabric_shape::spine(int leaf, int port) const {
    if (routing == "LeafPortModSpines") return port % spines;
    return (leaf * ports_per_leaf + port) % spines;
}

Rank_table Farm_plan::schedule() const {
    std::vector<Rank_function> functions;
    for (const Farm_rank& r : ranks) functions.push_back(r.function);
    return Rank_table(std::move(functions));
}

Farm_plan read_table(const nlohmann::json& table, const Fabric_shape& fabric) {
    if (fabric.leaves < 1 || fabric.spines < 1 || fabric.ports_per_leaf < 1 || fabric.links_per_pair < 1)
        throw std::invalid_argument("fabric: leaves, spines, portsPerLeaf and linksPerPair must be at least 1");
    if (fabric.routing != "PortModSpines" && fabric.routing != "LeafPortModSpines")
        throw std::invalid_argument("fabric: routing \"" + fabric.routing + "\" (PortModSpines or LeafPortModSpines)");
    Farm_plan plan{fabric, {}};
    const nlohmann::json& ranks = table.at("ranks");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        const nlohmann::json& r = ranks[i];
        if (r.at("rank").get<std::size_t>() != i)
            throw std::invalid_argument("rank table: entry " + std::to_string(i) + " is rank " + r.at("rank").dump());
        if (!r.contains("leaf") || !r.contains("port"))
            throw std::invalid_argument("rank table: rank " + std::to_string(i) +
                                        " has no leaf and port: a table planned on a Fabric is needed");
        Farm_rank rank{function_of(r), r.at("leaf").get<int>(), r.at("port").get<int>()};
        if (rank.leaf < 0 || rank.leaf >= fabric.leaves || rank.port < 0 || rank.port >= fabric.ports_per_leaf)
            throw std::invalid_argument("rank table: rank " + std::to_string(i) + " on leaf " + std::to_string(rank.leaf) +
                                        " port " + std::to_string(rank.port) + ", outside the fabric");
        plan.ranks.push_back(rank);
    }
    if (plan.live() < 2) throw std::invalid_argument("rank table: fewer than two live ranks");
    return plan;
}

Farm_plan one_switch_plan(int units) {
    if (units < 2) throw std::invalid_argument("--one-switch: at least 2 units");
    Farm_plan plan{Fabric_shape{1, 1, units, 1, "PortModSpines"}, {}};
    const std::vector<Rank_function> functions = flag_functions(static_cast<Rank>(units), Layout::folded, {});
    for (int r = 0; r < units; ++r) plan.ranks.push_back({functions[r], 0, r});
    return plan;
}

Farm_plan read_plan(const nlohmann::json& plan) {
    const nlohmann::json& f = plan.at("fabric");
    const Fabric_shape fabric{f.at("leaves").get<int>(), f.at("spines").get<int>(), f.at("portsPerLeaf").get<int>(),
                              f.at("linksPerPair").get<int>(), f.value("routing", std::string("PortModSpines"))};
    return read_table(plan.at("table"), fabric);
}

}  // namespace eb::sim
