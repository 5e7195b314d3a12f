// A file of MFPs replayed as a source: a unit joining a running set skips to
// where the set is, as from a readout driver's ring (Replay_reader).

#include "buffers/file_reader.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "formats/mfp.hpp"
#include "test_support.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

std::uint64_t first_event(std::span<const std::byte> mfp) { return load<Mfp_header>(mfp, 0).first_event_id; }

TEST(FileReader, AJoiningUnitSkipsToTheSetsEvent) {
    const std::string path = test::make_temp_dir() + "/source.mfp";
    {
        std::ofstream out(path, std::ios::binary);
        const std::vector<std::uint16_t> sizes(10, 8);
        std::vector<std::byte> mfp(mfp_bytes(sizes));
        for (std::uint64_t first = 0; first < 50; first += 10) {
            write_mfp(mfp, {1, first, 0}, sizes);
            out.write(reinterpret_cast<const char*>(mfp.data()), static_cast<std::streamsize>(mfp.size()));
        }
    }
    File_reader file(path);
    file.skip_to(30);
    EXPECT_EQ(first_event(file.next()), 30u);
    file.release();
    try {
        file.skip_to(20);
        FAIL() << "a file past the set's event cannot feed it";
    } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("--source-file " + path + " holds MFPs from event 40 on"), std::string::npos)
            << error.what();
    }
    EXPECT_EQ(first_event(file.next()), 40u) << "a refused skip consumes nothing";
    file.release();
    EXPECT_THROW(file.skip_to(50), std::runtime_error) << "the file ends before event 50";
}

}  // namespace
}  // namespace eb
