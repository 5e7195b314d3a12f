#include "base/data_threads.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace eb {

Data_threads::Data_threads(unsigned threads, Busy_poll idle_poll) : idle_poll_(idle_poll) {
    if (threads == 0 || threads > max_threads)
        throw std::invalid_argument("Data_threads: " + std::to_string(threads) + " threads, not 1.." +
                                    std::to_string(max_threads));
    workers_.reserve(threads - 1);
    for (unsigned index = 0; index + 1 < threads; ++index)
        workers_.emplace_back([this, index] { work(index); });
}

Data_threads::~Data_threads() {
    // A job of no parts tells the workers to end.
    const std::uint64_t stop = ((job_word_.load(std::memory_order_relaxed) >> part_bits) + 1) << part_bits;
    job_word_.store(stop, std::memory_order_release);
    job_word_.notify_all();
    workers_.clear();  // joins
}

void Data_threads::run(unsigned parts, const std::function<void(unsigned)>& part) {
    if (parts == 0) return;
    if (parts > size())
        throw std::logic_error("Data_threads: " + std::to_string(parts) + " parts for " + std::to_string(size()) +
                               " threads");
    if (parts == 1) return part(0);
    job_ = &part;
    error_ = nullptr;
    unfinished_.store(parts - 1, std::memory_order_relaxed);
    const std::uint64_t job = (((job_word_.load(std::memory_order_relaxed) >> part_bits) + 1) << part_bits) | parts;
    job_word_.store(job, std::memory_order_release);  // publishes the job
    job_word_.notify_all();
    try {
        part(0);
    } catch (...) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
    }
    // The workers' parts use memory the caller owns: wait for all of them.
    const auto done = [&] { return unfinished_.load(std::memory_order_acquire) == 0; };
    if (!idle_poll_.poll(done))
        for (unsigned left = unfinished_.load(std::memory_order_acquire); left != 0;
             left = unfinished_.load(std::memory_order_acquire))
            unfinished_.wait(left, std::memory_order_acquire);
    std::exception_ptr error;
    {
        std::lock_guard lock(error_mutex_);
        error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
}

void Data_threads::finish_part(std::exception_ptr error) {
    if (error) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::move(error);
    }
    if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) unfinished_.notify_one();
}

void Data_threads::work(unsigned index) {
    constexpr std::uint64_t parts_mask = (std::uint64_t{1} << part_bits) - 1;
    std::uint64_t seen = 0;
    while (true) {
        const auto moved = [&] { return job_word_.load(std::memory_order_acquire) != seen; };
        if (!idle_poll_.poll(moved))
            while (!moved()) job_word_.wait(seen, std::memory_order_acquire);
        seen = job_word_.load(std::memory_order_acquire);
        const unsigned parts = static_cast<unsigned>(seen & parts_mask);
        if (parts == 0) return;
        const unsigned part = index + 1;
        if (part >= parts) continue;  // a job of fewer parts: not this worker's
        std::exception_ptr error;
        try {
            (*job_)(part);
        } catch (...) {
            error = std::current_exception();
        }
        finish_part(std::move(error));
    }
}

}  // namespace eb
