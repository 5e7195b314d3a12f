#include "buffers/shm_text.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "base/fd.hpp"
#include "base/socket.hpp"

namespace eb {

void write_shm_text(const std::string& name, const std::string& text) {
    const Fd fd(::shm_open(name.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644));
    if (!fd) throw std::runtime_error("shm_open " + name + ": " + error_text(errno));
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("writing " + name + ": " + error_text(errno));
        done += static_cast<std::size_t>(n);
    }
}

std::optional<std::string> read_shm_text(const std::string& name) {
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
    return text;
}

}  // namespace eb
