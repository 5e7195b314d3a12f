#include "buffers/source_cursor.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>

#include "buffers/generator_reader.hpp"
#include "formats/wire_format.hpp"

namespace eb {
namespace {

constexpr std::uint32_t packing_factor = 10;

// A source that cannot seek, as a shared-memory ring or a replayed file.
class Unseekable final : public Buffer_reader {
public:
    explicit Unseekable(Buffer_reader& inner) : inner_(inner) {}
    std::span<const std::byte> next() override { return inner_.next(); }
    void release() override { inner_.release(); }
    const Memory_regions& regions() const override { return inner_.regions(); }

private:
    Buffer_reader& inner_;
};

std::uint64_t chunk_of(std::span<const std::byte> mfp) {
    return load<Mfp_header>(mfp, 0).first_event_id / packing_factor;
}

// A session took `taken` MFPs and released `released` of them (a session
// that ended inside a cycle releases none of that cycle's); the next one
// starts at `start`: which chunks come out next, and whether a source that
// cannot seek serves it too.
TEST(SourceCursor, TheNextSessionStartsExactlyAtItsChunk) {
    struct Case {
        const char* name;
        int taken, released;
        std::uint64_t start;
        bool needs_seek;
    };
    const Case cases[] = {
        {"fresh, from the start", 0, 0, 0, false},
        {"fresh, joining a running set", 0, 0, 3, true},
        {"between cycles", 4, 4, 4, false},
        {"stopped inside a cycle that nobody finished: the held MFPs again", 4, 2, 2, false},
        {"stopped inside a cycle that the set finished: the held MFPs released", 4, 2, 4, false},
        {"stopped inside a cycle, restarted at its second chunk", 4, 2, 3, false},
        {"stopped inside a cycle, the set far ahead", 4, 2, 9, true},
        {"stopped inside a cycle, the set behind", 4, 2, 1, true},
    };
    for (const auto& c : cases) {
        for (const bool seekable : {true, false}) {
            SCOPED_TRACE(std::string(c.name) + (seekable ? ", seekable" : ", unseekable"));
            Generator_reader generator(0, packing_factor, {Size_model::fixed, 8}, 8);
            std::optional<Unseekable> unseekable;
            Buffer_reader& inner = seekable ? static_cast<Buffer_reader&>(generator) : unseekable.emplace(generator);
            Source_cursor cursor(inner, packing_factor);
            for (int i = 0; i < c.taken; ++i) cursor.next();
            for (int i = 0; i < c.released; ++i) cursor.release();
            if (!seekable && c.needs_seek) {
                EXPECT_THROW(cursor.start_at(c.start), std::runtime_error);
                continue;
            }
            cursor.start_at(c.start);
            // Two cycles of three chunks: nothing left held blocks the source (depth 8).
            for (int cycle = 0; cycle < 2; ++cycle) {
                for (std::uint64_t i = 0; i < 3; ++i) EXPECT_EQ(chunk_of(cursor.next()), c.start + 3 * cycle + i);
                for (int i = 0; i < 3; ++i) cursor.release();
            }
        }
    }
}

TEST(SourceCursor, ReleasesOnlyWhatItHandedOut) {
    Generator_reader generator(0, packing_factor, {Size_model::fixed, 8}, 2);
    Source_cursor cursor(generator, packing_factor);
    cursor.next();
    cursor.start_at(0);
    EXPECT_THROW(cursor.release(), std::logic_error) << "the held MFP is to be handed out again first";
}

}  // namespace
}  // namespace eb
