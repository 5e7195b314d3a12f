#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/busy_poll.hpp"

namespace eb {

// Where part `part` of `parts` near-equal parts of `total` items starts
// (part == parts: total). Every job cut into parts for the data threads
// cuts it so, and both ends of a sliced TCP message do.
constexpr std::size_t part_start(std::size_t total, unsigned part, unsigned parts) {
    return total * part / parts;
}

// A unit's data path threads (--data-threads K): the calling thread and
// K - 1 workers that run the parts of one job together and return when all
// are done (fork-join). A TCP phase's send and receive each take a thread,
// so a unit moves what two cores can copy instead of one. The workers
// inherit the process's CPU affinity and memory policy (the NUMA node it
// was pinned to) and start at once; between jobs each looks for the next
// one for the busy-poll window, then sleeps.
class Data_threads {
public:
    static constexpr unsigned max_threads = 64;

    Data_threads(unsigned threads, Busy_poll idle_poll);  // 1..max_threads
    ~Data_threads();  // stops and joins the workers
    Data_threads(const Data_threads&) = delete;
    Data_threads& operator=(const Data_threads&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Runs part(i) for every i < parts (at most size()): part 0 on the
    // calling thread, part i on worker i - 1. Returns once every part has;
    // then rethrows the first exception a part threw, if any.
    void run(unsigned parts, const std::function<void(unsigned part)>& part);

private:
    void work(unsigned index);
    void finish_part(std::exception_ptr error);

    Busy_poll idle_poll_;
    // The job in hand: its number above, its parts in the low byte (none:
    // the workers stop), read at once so a worker never mixes two jobs. The
    // job's function is set before and read only by the workers it has parts for.
    static constexpr unsigned part_bits = 8;
    std::atomic<std::uint64_t> job_word_{0};
    const std::function<void(unsigned)>* job_ = nullptr;
    std::atomic<unsigned> unfinished_{0};  // the workers' parts of the job
    std::mutex error_mutex_;
    std::exception_ptr error_;
    std::vector<std::jthread> workers_;  // last: started once the rest is
};

}  // namespace eb
