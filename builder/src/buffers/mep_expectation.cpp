#include "mep_expectation.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <stdexcept>

#include "fd.hpp"
#include "socket.hpp"

namespace eb {

std::string mep_expectation_name(const std::string& ring, std::uint32_t epoch) {
    return ring + "-epoch-" + std::to_string(epoch);
}

void publish_mep_expectation(const std::string& ring, const Mep_expectation& expectation) {
    std::string text = "epoch " + std::to_string(expectation.epoch) + " stride " + std::to_string(expectation.stride) +
                       " sources";
    for (const std::uint32_t source : expectation.sources) text += " " + std::to_string(source);
    text += "\n";
    const std::string name = mep_expectation_name(ring, expectation.epoch);
    const Fd fd(::shm_open(name.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644));
    if (!fd) throw std::runtime_error("shm_open " + name + ": " + error_text(errno));
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("writing " + name + ": " + error_text(errno));
        done += static_cast<std::size_t>(n);
    }
}

std::optional<Mep_expectation> read_mep_expectation(const std::string& ring, std::uint32_t epoch) {
    const std::string name = mep_expectation_name(ring, epoch);
    const Fd fd(::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        throw std::runtime_error("shm_open " + name + ": " + error_text(errno));
    }
    std::string text;
    char chunk[4096];
    while (true) {
        const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error("reading " + name + ": " + error_text(errno));
        if (n == 0) break;
        text.append(chunk, static_cast<std::size_t>(n));
    }
    std::istringstream in(text);
    Mep_expectation expectation;
    std::string epoch_word, stride_word, sources_word;
    in >> epoch_word >> expectation.epoch >> stride_word >> expectation.stride >> sources_word;
    for (std::uint32_t source = 0; in >> source;) expectation.sources.push_back(source);
    if (epoch_word != "epoch" || stride_word != "stride" || sources_word != "sources" || !in.eof() ||
        expectation.epoch != epoch || expectation.stride == 0 || expectation.sources.empty())
        throw std::runtime_error(name + " holds '" + text.substr(0, text.find('\n')) +
                                 "'; expected 'epoch " + std::to_string(epoch) + " stride S sources A B ...'");
    return expectation;
}

void remove_mep_expectation(const std::string& ring, std::uint32_t epoch) {
    ::shm_unlink(mep_expectation_name(ring, epoch).c_str());
}

}  // namespace eb
