#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "buffers/replay_reader.hpp"

namespace eb {

// Replays a file of MFPs back to back (docs/formats.md), once: each element
// is one MFP as its header's total_bytes delimits it; the RU checks it like
// any other source's. After the last, next() returns an empty span. A length
// that runs past the file end yields the rest of the file as one element.
class File_reader final : public Replay_reader {
public:
    explicit File_reader(const std::string& path);  // reads it whole; throws naming the path

    std::span<const std::byte> next() override;
    void release() override;
    const Memory_regions& regions() const override { return regions_; }

private:
    void put_back() override;
    std::string description() const override { return "--source-file " + path_; }

    std::string path_;
    std::vector<std::byte> data_;
    std::size_t last_ = 0;  // length of the element handed out last
    std::size_t read_ = 0;
    std::size_t held_ = 0;
    Memory_regions regions_;  // the whole file
};

}  // namespace eb
