// eb-fuzz-seeds DIR: writes DIR/mfp/seed and DIR/mep/seed, well-formed inputs
// of the shape mep_fuzz.cpp checks, so fuzzing starts past the magic checks.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "formats/event_model.hpp"
#include "formats/mep_layout.hpp"
#include "formats/mfp.hpp"
#include "seed_streams.hpp"

namespace {

std::vector<std::uint16_t> sizes_of(std::uint32_t source) {
    const eb::Fragment_sizes size_of({eb::Size_model::poisson, 20}, source);
    std::vector<std::uint16_t> sizes;
    for (std::uint64_t event = 8; event < 12; ++event) sizes.push_back(size_of(event));
    return sizes;
}

void write(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: eb-fuzz-seeds DIR\n";
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    std::vector<std::uint64_t> mfp_sizes;
    for (std::uint32_t source = 0; source < 3; ++source) mfp_sizes.push_back(eb::mfp_bytes(sizes_of(source)));
    const std::vector<std::byte> streams = eb::encode_stream_map(eb::seed_stream_map());
    const eb::Mep_layout layout = eb::mep_layout(mfp_sizes, streams.size());
    std::vector<std::byte> mep(layout.total_bytes);
    eb::write_mep_header(mep, layout, 8, 4, 1, streams);
    for (std::uint32_t source = 0; source < 3; ++source)
        eb::write_mfp(std::span(mep).subspan(layout.offsets[source], mfp_sizes[source]),
                      {source, 8, eb::fragment_type(source)}, sizes_of(source));
    write(dir / "mep" / "seed", mep);
    write(dir / "mfp" / "seed",
          std::vector<std::byte>(mep.begin() + static_cast<std::ptrdiff_t>(layout.offsets[0]),
                                 mep.begin() + static_cast<std::ptrdiff_t>(layout.offsets[0] + mfp_sizes[0])));
    return 0;
}
