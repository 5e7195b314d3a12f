#include "farm_sim.hpp"

#include <simgrid/plugins/load.h>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "formats/mfp.hpp"
#include "schedule/schedule.hpp"

namespace sg4 = simgrid::s4u;

namespace eb::sim {
namespace {

constexpr double bits_per_gbit = 1e9;
constexpr std::uint64_t barrier_token_bytes = 64;

// Data flows on each NIC link: how long a link carried more than one (the
// schedule keeps every NIC to one flow per direction). A data message
// flows from its send (its receive is posted, so it moves at once) to its
// finish. SimGrid signals a send's completion only once its sender waits
// for it, maybe long after the finish, so each link keeps the flows ended
// since the earliest one still open, and counts their overlap up to then.
class Link_flows {
public:
    explicit Link_flows(std::size_t links) : links_(links) {}

    void started(const sg4::Activity* comm, const std::vector<int>& links) {
        const double now = sg4::Engine::get_clock();
        on_[comm] = {&links, now};
        for (const int l : links) links_[l].open.insert(now);
    }

    void finished(const sg4::Activity& comm) {
        const auto it = on_.find(&comm);
        if (it == on_.end()) return;  // not a data message
        const auto [links, start] = it->second;
        on_.erase(it);
        for (const int l : *links) {
            Link& link = links_[l];
            link.open.erase(link.open.find(start));
            link.ended.emplace_back(start, comm.get_finish_time());
            if (link.ended.size() >= settle_after)
                settle(link, std::min(sg4::Engine::get_clock(), link.open.empty() ? INFINITY : *link.open.begin()));
        }
    }

    // Once every flow has ended.
    double shared_seconds(int link) {
        settle(links_[link], INFINITY);
        return links_[link].shared;
    }

private:
    struct Link {
        std::multiset<double> open;                    // starts of the flows not ended yet
        std::vector<std::pair<double, double>> ended;  // (start, finish) not settled yet
        double shared = 0;
    };
    static constexpr std::size_t settle_after = 32;

    // Counts the time up to `horizon` (no flow open or to come starts
    // before it) that two or more ended flows overlap, and keeps what lies after.
    static void settle(Link& link, double horizon) {
        std::vector<std::pair<double, int>> edges;
        for (const auto& [start, finish] : link.ended) {
            const double end = std::min(finish, horizon);
            if (start >= end) continue;
            edges.emplace_back(start, +1);
            edges.emplace_back(end, -1);
        }
        std::sort(edges.begin(), edges.end());  // at one instant an end (-1) comes before a start
        int flows = 0;
        double since = 0;
        for (const auto& [at, delta] : edges) {
            if (flows > 1) link.shared += at - since;
            flows += delta;
            since = at;
        }
        std::erase_if(link.ended, [&](const auto& flow) { return flow.second <= horizon; });
        for (auto& flow : link.ended) flow.first = std::max(flow.first, horizon);
    }

    std::vector<Link> links_;
    std::unordered_map<const sg4::Activity*, std::pair<const std::vector<int>*, double>> on_;
};

// The platform: a host per rank, its NIC's two directions, and one link per
// leaf-spine pair and direction carrying linksPerPair links' bandwidth;
// routes as the fabric's switches route.
struct Platform {
    std::vector<sg4::Host*> hosts;
    std::vector<sg4::Link*> links;  // NIC up, NIC down per rank; then trunks
    std::vector<bool> nic;          // links[i] is a NIC's
    std::vector<std::vector<int>> route;  // [src * N + dst] -> link indices, live pairs only

    const std::vector<int>& links_between(int src, int dst) const { return route[src * hosts.size() + dst]; }
};

Platform build_platform(const Farm_plan& plan, const Rank_table& table, const Network_model& network) {
    const int n = static_cast<int>(plan.ranks.size());
    const Fabric_shape& f = plan.fabric;
    Platform p;
    auto* zone = sg4::create_full_zone("farm");
    const auto add_link = [&](const std::string& name, double gbps, double latency, bool is_nic) {
        sg4::Link* link = zone->create_link(name, gbps * bits_per_gbit / 8)->set_latency(latency);
        link->seal();
        p.links.push_back(link);
        p.nic.push_back(is_nic);
        return static_cast<int>(p.links.size()) - 1;
    };
    std::vector<int> nic_up(n), nic_down(n);
    for (int r = 0; r < n; ++r) {
        p.hosts.push_back(zone->create_host("rank-" + std::to_string(r), 1e9));
        nic_up[r] = add_link("nic-up-" + std::to_string(r), network.nic_gbps, network.nic_latency_s, true);
        nic_down[r] = add_link("nic-down-" + std::to_string(r), network.nic_gbps, network.nic_latency_s, true);
    }
    const double trunk_gbps = network.link_gbps * f.links_per_pair;
    std::vector<int> up(f.leaves * f.spines), down(f.spines * f.leaves);
    for (int l = 0; l < f.leaves; ++l)
        for (int s = 0; s < f.spines; ++s) {
            up[l * f.spines + s] = add_link("leaf" + std::to_string(l) + "-spine" + std::to_string(s), trunk_gbps,
                                            network.link_latency_s, false);
            down[s * f.leaves + l] = add_link("spine" + std::to_string(s) + "-leaf" + std::to_string(l), trunk_gbps,
                                              network.link_latency_s, false);
        }
    p.route.resize(static_cast<std::size_t>(n) * n);
    for (const Rank a : table.live_ranks()) {
        for (const Rank b : table.live_ranks()) {
            if (a == b) continue;
            const Farm_rank &src = plan.ranks[a], &dst = plan.ranks[b];
            std::vector<int>& links = p.route[a * n + b];
            links.push_back(nic_up[a]);
            if (src.leaf != dst.leaf) {
                const int spine = f.spine(dst.leaf, dst.port);
                links.push_back(up[src.leaf * f.spines + spine]);
                links.push_back(down[spine * f.leaves + dst.leaf]);
            }
            links.push_back(nic_down[b]);
            std::vector<sg4::LinkInRoute> in_route;
            for (const int l : links) in_route.emplace_back(p.links[l]);
            zone->add_route(p.hosts[a]->get_netpoint(), p.hosts[b]->get_netpoint(), nullptr, nullptr, in_route, false);
        }
    }
    zone->seal();
    for (const sg4::Link* link : p.links) sg_link_load_track(link);
    return p;
}

sg4::Mailbox* data_box(int src, int dst) { return sg4::Mailbox::by_name("d" + std::to_string(src) + "-" + std::to_string(dst)); }
sg4::Mailbox* credit_box(int src, int dst) { return sg4::Mailbox::by_name("c" + std::to_string(src) + "-" + std::to_string(dst)); }
sg4::Mailbox* barrier_box(int src, int dst) { return sg4::Mailbox::by_name("b" + std::to_string(src) + "-" + std::to_string(dst)); }

// Shared by the actors (SimGrid runs one at a time).
struct Simulation {
    const Farm_plan& plan;
    const Network_model& network;
    const Jitter_model& jitter;
    const Run_model& run;
    const Rank_table& table;            // the schedule's view: who runs an RU, a BU
    const std::vector<Rank>& live;      // live ranks, ascending: barrier positions
    std::vector<int> position;          // rank -> position among live, -1 for dummies
    std::vector<std::uint64_t> mfp;     // rank -> its MFP bytes
    sg4::BarrierPtr start, round;       // set-up done; the all-to-all control rounds
    const Platform* platform = nullptr;
    Link_flows* flows = nullptr;
    double barrier_seconds = 0, end = 0, network_bytes = 0;
    int token = 0;                      // a payload to send: SimGrid wants one
    std::chrono::steady_clock::time_point wall_start = std::chrono::steady_clock::now();

    bool runs_ru(int r) const { return table.runs_ru(static_cast<Rank>(r)); }
    bool runs_bu(int r) const { return table.runs_bu(static_cast<Rank>(r)); }
};

// One rank's builder: per cycle, the header round, the N-1 phases of
// linear shifting (send to BU r+p, receive from RU r-p, wait for both),
// barriers every barrier_every phases, and the proposal round.
class Rank_actor {
public:
    Rank_actor(Simulation& sim, int rank) : sim_(sim), rank_(rank), rng_(sim.jitter.seed * 1000003 + rank) {}

    void operator()() {
        const int n = static_cast<int>(sim_.plan.ranks.size());
        // Receives are posted ahead: data flows as soon as it is sent, and
        // with a receive window an RU sends only on its BU's credit.
        for (const int peer : sim_.live)
            if (peer != rank_) {
                data_box(peer, rank_)->set_receiver(sg4::Actor::self());
                if (sim_.run.receive_window > 0) credit_box(peer, rank_)->set_receiver(sg4::Actor::self());
            }
        const Barrier_role role = barrier_role(sim_.run.barrier, sim_.position[rank_], sim_.live.size());
        if (role.parent) barrier_box(sim_.live[*role.parent], rank_)->set_receiver(sg4::Actor::self());
        for (const std::size_t child : role.children) barrier_box(sim_.live[child], rank_)->set_receiver(sg4::Actor::self());
        sim_.start->wait();
        if (sim_.run.barrier_rounds > 0) {
            for (std::uint32_t round = 0; round < sim_.run.barrier_rounds; ++round) barrier(role);
            sim_.end = std::max(sim_.end, sg4::Engine::get_clock());
            return;
        }
        std::uint64_t phases = 0;
        for (std::uint32_t cycle = 0; cycle < sim_.run.cycles; ++cycle) {
            control_round();
            posted_through_ = 0;
            for (int phase = 1; phase < n; ++phase) {
                run_phase(phase, n);
                if (sim_.run.barrier != Barrier_kind::none && phase + 1 < n && ++phases % sim_.run.barrier_every == 0)
                    barrier(role);
            }
            control_round();
            if (sim_.position[rank_] == 0) progress(cycle + 1);
        }
        for (const int peer : sim_.live)
            if (peer != rank_) {
                data_box(peer, rank_)->set_receiver(nullptr);
                credit_box(peer, rank_)->set_receiver(nullptr);
            }
        sim_.end = std::max(sim_.end, sg4::Engine::get_clock());
    }

private:
    void run_phase(int phase, int n) {
        int target = static_cast<int>(send_target(rank_, phase, n));
        if (sim_.run.violate_schedule && rank_ == 0 && (phase == 1 || phase == 2))
            target = static_cast<int>(send_target(rank_, 3 - phase, n));
        const int source = static_cast<int>(receive_source(rank_, phase, n));
        sg4::CommPtr send;
        if (sim_.run.receive_window > 0) post_receives(phase, n);
        if (sim_.runs_ru(rank_) && sim_.runs_bu(target)) {
            if (sim_.run.receive_window > 0) {
                credit_box(target, rank_)->get<int>();
                host_time(sim_.network.message_overhead_s);
            }
            host_time(sim_.network.message_overhead_s);
            send = data_box(rank_, target)->put_async(&sim_.token, sim_.mfp[rank_]);
            sim_.flows->started(send.get(), sim_.platform->links_between(rank_, target));
            sim_.network_bytes += sim_.mfp[rank_];
        }
        if (sim_.runs_bu(rank_) && sim_.runs_ru(source)) {
            data_box(source, rank_)->get<int>();
            host_time(sim_.network.message_overhead_s);
        }
        if (send) send->wait();
        host_time(noise());
    }

    // Posts the receives of this phase and the window's next ones within
    // the cycle (the next cycle's wait for its header round), each sending
    // its RU a credit, as the builder's verbs transport does.
    void post_receives(int phase, int n) {
        if (!sim_.runs_bu(rank_)) return;
        const int last = std::min(n - 1, phase + static_cast<int>(sim_.run.receive_window) - 1);
        for (int ahead = std::max(phase, posted_through_ + 1); ahead <= last; ++ahead) {
            const int source = static_cast<int>(receive_source(rank_, ahead, n));
            if (!sim_.runs_ru(source)) continue;
            host_time(sim_.network.message_overhead_s);
            credit_box(rank_, source)->put_init(&sim_.token, barrier_token_bytes)->detach();
        }
        posted_through_ = std::max(posted_through_, last);
    }

    // Arrival: every child's token, then the parent's; release: the
    // parent's, then every child's (barrier_role).
    void barrier(const Barrier_role& role) {
        const double from = sg4::Engine::get_clock();
        for (const std::size_t child : role.children) token_from(sim_.live[child]);
        if (role.parent) {
            token_to(sim_.live[*role.parent]);
            token_from(sim_.live[*role.parent]);
        }
        for (const std::size_t child : role.children) token_to(sim_.live[child]);
        sim_.barrier_seconds += sg4::Engine::get_clock() - from;
    }

    void token_from(int peer) {
        barrier_box(peer, rank_)->get<int>();
        host_time(sim_.network.message_overhead_s);
    }

    void token_to(int peer) {
        host_time(sim_.network.message_overhead_s);
        barrier_box(rank_, peer)->put(&sim_.token, barrier_token_bytes);
    }

    // The cycle's header or proposal round: every live rank sends each a
    // small message and waits for all of theirs, which ends when the last
    // rank is there: modelled as a rendezvous plus each rank's host time
    // for its messages and one network latency.
    void control_round() {
        sim_.round->wait();
        host_time(2.0 * (sim_.live.size() - 1) * sim_.network.message_overhead_s + 2 * sim_.network.nic_latency_s +
                  2 * sim_.network.link_latency_s);
    }

    // Long simulations say how far they are (the first live rank, per cycle).
    void progress(std::uint32_t cycles_done) const {
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - sim_.wall_start).count();
        std::cerr << "eb-farm-sim: cycle " << cycles_done << "/" << sim_.run.cycles << " done at " << sg4::Engine::get_clock()
                  << " s simulated, " << wall << " s wall\n";
    }

    double noise() {
        double delay = 0;
        if (sim_.jitter.phase_noise_s > 0) delay += std::exponential_distribution<double>(1 / sim_.jitter.phase_noise_s)(rng_);
        if (sim_.jitter.straggler_probability > 0 && std::uniform_real_distribution<double>()(rng_) < sim_.jitter.straggler_probability)
            delay += sim_.jitter.straggler_s;
        return delay;
    }

    static void host_time(double seconds) {
        if (seconds > 0) sg4::this_actor::sleep_for(seconds);
    }

    Simulation& sim_;
    int rank_;
    std::mt19937_64 rng_;
    int posted_through_ = 0;  // the last phase of this cycle whose receive is posted
};

}  // namespace

std::uint64_t mean_mfp_bytes(const Run_model& run, std::uint32_t source) {
    const double mean = mean_fragment_size(run.events, source);
    return mfp_bytes(run.packing_factor, static_cast<std::uint32_t>(mean + 0.5));
}

double analytic_throughput_tbps(const Farm_plan& plan, const Network_model& network) {
    // Per cycle each RU sends one MFP to every BU but itself, over N-1 phases.
    const Rank_table table = plan.schedule();
    double both = 0;
    for (const Rank r : table.rus()) both += table.runs_bu(r);
    const double messages = static_cast<double>(table.rus().size()) * table.bus().size() - both;
    return messages / (static_cast<double>(plan.ranks.size()) - 1) * std::min(network.nic_gbps, network.link_gbps) / 1000;
}

Sim_result simulate(const Farm_plan& plan, const Network_model& network, const Jitter_model& jitter, const Run_model& run,
                    int argc, char** argv) {
    if (run.barrier_every == 0 || run.cycles == 0 || run.packing_factor == 0)
        throw std::invalid_argument("barrier-every, cycles and packing factor must be at least 1");
    sg4::Engine engine(&argc, argv);
    // Max-min fair sharing of each link's bandwidth, no TCP factors: a
    // lossless fabric (InfiniBand), whose links the flows share evenly.
    engine.set_config("network/model:CM02");
    engine.set_config("network/crosstraffic:0");
    sg_link_load_plugin_init();
    const Rank_table table = plan.schedule();
    const Platform platform = build_platform(plan, table, network);

    Simulation sim{plan, network, jitter, run, table, table.live_ranks(), {}, {}, nullptr, nullptr};
    const int n = static_cast<int>(plan.ranks.size());
    sim.position.assign(n, -1);
    for (int r = 0; r < n; ++r) sim.mfp.push_back(mean_mfp_bytes(run, static_cast<std::uint32_t>(r)));
    for (std::size_t i = 0; i < sim.live.size(); ++i) sim.position[sim.live[i]] = static_cast<int>(i);
    sim.start = sg4::Barrier::create(sim.live.size());
    sim.round = sg4::Barrier::create(sim.live.size());

    Link_flows flows(platform.links.size());
    sim.platform = &platform;
    sim.flows = &flows;
    sg4::Activity::on_completion_cb([&](const sg4::Activity& activity) { flows.finished(activity); });
    for (const int r : sim.live) sg4::Actor::create("rank-" + std::to_string(r), platform.hosts[r], Rank_actor(sim, r));
    engine.run();

    Sim_result result;
    result.ranks = n;
    result.live = static_cast<int>(sim.live.size());
    result.seconds = sim.end;
    result.events = static_cast<double>(run.cycles) * run.packing_factor * table.bus().size();
    result.event_rate = result.events / result.seconds;
    result.network_bytes = sim.network_bytes;
    result.throughput_tbps = sim.network_bytes * 8 / result.seconds / 1e12;
    result.barrier_share = sim.barrier_seconds / (result.seconds * result.live);
    if (run.barrier_rounds > 0) {
        result.barrier_round_s = result.seconds / run.barrier_rounds;
        result.events = result.event_rate = 0;
    }
    double sum = 0;
    int used = 0;
    for (std::size_t l = 0; l < platform.links.size(); ++l) {
        const double utilisation = sg_link_get_cum_load(platform.links[l]) / result.seconds / platform.links[l]->get_bandwidth();
        result.max_link_utilisation = std::max(result.max_link_utilisation, utilisation);
        if (platform.nic[l]) {
            result.shared_link_seconds += flows.shared_seconds(static_cast<int>(l));
        } else if (utilisation > 0) {
            sum += utilisation;
            ++used;
        }
    }
    result.mean_link_utilisation = used > 0 ? sum / used : 0;
    return result;
}

}  // namespace eb::sim
