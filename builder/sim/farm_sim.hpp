#pragma once

#include <cstdint>
#include <string>

#include "farm_plan.hpp"
#include "formats/event_model.hpp"
#include "schedule/barrier_plan.hpp"

namespace eb::sim {

// The network's costs. Link and NIC figures are per direction.
struct Network_model {
    double nic_gbps = 200;           // each endpoint's HCA
    double link_gbps = 200;          // each leaf-spine link (a pair has linksPerPair of them)
    double nic_latency_s = 0.6e-6;   // endpoint to leaf
    double link_latency_s = 0.15e-6; // leaf to spine
    double message_overhead_s = 0;   // host time to post and complete one message
};

// Noise on the hosts: each phase of each rank takes an extra delay drawn
// from an exponential of mean phase_noise_s, and with probability
// straggler_probability a straggler's delay of straggler_s more.
struct Jitter_model {
    double phase_noise_s = 0;
    double straggler_probability = 0;
    double straggler_s = 0;
    std::uint64_t seed = 1;
};

// What the builders run: their schedule (the builder's own linear
// shifting and barrier plans), MFP sizes from its event-size model.
struct Run_model {
    std::uint32_t packing_factor = 10000;
    Event_model events{Size_model::poisson, 133};
    Barrier_kind barrier = Barrier_kind::tournament;
    std::uint32_t barrier_every = 1;  // phases between barriers (--barrier-every)
    std::uint32_t cycles = 10;
    // For tests: RU 0 swaps its first two phases' targets, so in phase 1
    // two RUs send to one BU, as a broken schedule would.
    bool violate_schedule = false;
    // eb-builder --receive-window: a BU posts its receives only this many
    // phases ahead, each sending its RU a credit (a small message) that the
    // RU waits for before it sends its MFP, as the builder's verbs credits
    // do. 0: a cycle's receives at once, their credits with the headers
    // (builder/docs/verbs.md).
    std::uint32_t receive_window = 0;
    // Calibration: run this many barrier rounds and nothing else.
    std::uint32_t barrier_rounds = 0;
};

struct Sim_result {
    int ranks = 0, live = 0;
    double seconds = 0;           // simulated time of the whole run
    double events = 0;            // events built
    double event_rate = 0;        // events per second
    double network_bytes = 0;     // MFP bytes over the network
    double throughput_tbps = 0;   // aggregate
    double barrier_share = 0;     // share of the ranks' time in barriers
    double max_link_utilisation = 0;   // over the leaf-spine links and NICs
    double mean_link_utilisation = 0;  // over the leaf-spine links that carried data
    double shared_link_seconds = 0;    // link-seconds with more than one flow on a NIC link
    double barrier_round_s = 0;        // with Run_model::barrier_rounds: the mean round
};

// Runs the plan's live ranks as SimGrid actors on a platform made from its
// fabric. SimGrid allows one simulation per process.
Sim_result simulate(const Farm_plan& plan, const Network_model& network, const Jitter_model& jitter, const Run_model& run,
                    int argc, char** argv);

// The MFP of one source, in bytes, at the event model's mean sizes.
std::uint64_t mean_mfp_bytes(const Run_model& run, std::uint32_t source);

// What an ideal network moves, in Tb/s: each of a cycle's N-1 phases takes
// one MFP's time at min(NIC, link) (a fabric no phase overloads, no
// barrier, host cost or latency), and moves one MFP per RU with a BU to
// send to: for L folded live ranks of N, L(L-1)/(N-1) MFPs per phase,
// about live/(live+dummy) of every NIC.
double analytic_throughput_tbps(const Farm_plan& plan, const Network_model& network);

}  // namespace eb::sim
