#include "buffers/file_reader.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "formats/wire_format.hpp"

namespace eb {

File_reader::File_reader(const std::string& path) : path_(path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw std::runtime_error("--source-file " + path + ": cannot open it");
    const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (file.bad()) throw std::runtime_error("--source-file " + path + ": read error");
    data_.resize(bytes.size());
    std::transform(bytes.begin(), bytes.end(), data_.begin(), [](char c) { return static_cast<std::byte>(c); });
    regions_.assign({std::span<const std::byte>(data_)});
}

std::span<const std::byte> File_reader::next() {
    const std::span<const std::byte> rest = std::span(data_).subspan(read_);
    std::size_t length = rest.size();
    if (rest.size() >= sizeof(Mfp_header)) {
        const std::uint64_t total = load<Mfp_header>(rest, 0).total_bytes;
        if (total >= sizeof(Mfp_header) && total <= rest.size()) length = total;
    }
    read_ += length;
    last_ = length;
    ++held_;
    return rest.first(length);
}

void File_reader::put_back() {
    read_ -= last_;
    last_ = 0;
    --held_;
}

void File_reader::release() {
    if (held_ == 0) throw std::logic_error("File_reader: release without a held MFP");
    --held_;
}

}  // namespace eb
