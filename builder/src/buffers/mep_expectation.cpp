#include "buffers/mep_expectation.hpp"

#include <sys/mman.h>

#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_set>
#include <stdexcept>

#include "buffers/shm_text.hpp"
#include "base/stream_name.hpp"

namespace eb {

std::string mep_expectation_name(const std::string& ring, std::uint32_t epoch) {
    return ring + "-epoch-" + std::to_string(epoch);
}

void publish_mep_expectation(const std::string& ring, const Mep_expectation& expectation) {
    std::string text = "epoch " + std::to_string(expectation.epoch) + " stride " + std::to_string(expectation.stride) +
                       " sources";
    for (const std::uint32_t source : expectation.sources) text += " " + std::to_string(source);
    text += "\n";
    for (std::size_t slot = 0; slot < expectation.sources.size(); ++slot) {
        text += "held " + std::to_string(expectation.sources[slot]);
        if (slot < expectation.streams.held.size())
            for (const std::string& name : expectation.streams.held[slot]) text += " " + name;
        text += "\n";
    }
    text += "lacked";
    for (const std::string& name : expectation.streams.lacked) text += " " + name;
    text += "\n";
    write_shm_text(mep_expectation_name(ring, expectation.epoch), text);
}

std::optional<Mep_expectation> read_mep_expectation(const std::string& ring, std::uint32_t epoch) {
    const std::string name = mep_expectation_name(ring, epoch);
    const std::optional<std::string> text = read_shm_text(name);
    if (!text) return std::nullopt;
    std::istringstream lines(*text);
    std::string line;
    std::getline(lines, line);
    std::istringstream in(line);
    Mep_expectation expectation;
    std::string epoch_word, stride_word, sources_word;
    in >> epoch_word >> expectation.epoch >> stride_word >> expectation.stride >> sources_word;
    for (std::uint32_t source = 0; in >> source;) expectation.sources.push_back(source);
    if (epoch_word != "epoch" || stride_word != "stride" || sources_word != "sources" || !in.eof() ||
        expectation.epoch != epoch || expectation.stride == 0 || expectation.sources.empty())
        throw std::runtime_error(name + " holds '" + line + "'; expected 'epoch " + std::to_string(epoch) +
                                 " stride S sources A B ...'");
    // Then the stream map: "held A name ..." per source in slot order, "lacked name ...".
    std::unordered_set<std::string> seen;
    const auto names_after = [&](std::string_view word, std::optional<std::uint32_t> source) {
        std::istringstream words(line);
        std::string first;
        std::uint32_t id = 0;
        words >> first;
        if (first != word || (source && !(words >> id && id == *source)))
            throw std::runtime_error(name + " holds '" + line + "' where '" + std::string(word) +
                                     (source ? " " + std::to_string(*source) : std::string()) + " name ...' belongs");
        std::vector<std::string> names;
        for (std::string stream; words >> stream;) {
            if (!valid_stream_name(stream) || !seen.insert(stream).second)
                throw std::runtime_error(name + " holds '" + line + "': '" + stream + "' is not " +
                                         std::string(stream_name_rule) + " listed once");
            names.push_back(stream);
        }
        return names;
    };
    for (const std::uint32_t source : expectation.sources) {
        if (!std::getline(lines, line)) line.clear();
        expectation.streams.held.push_back(names_after("held", source));
    }
    if (!std::getline(lines, line)) line.clear();
    expectation.streams.lacked = names_after("lacked", std::nullopt);
    return expectation;
}

void remove_mep_expectation(const std::string& ring, std::uint32_t epoch) {
    ::shm_unlink(mep_expectation_name(ring, epoch).c_str());
}

}  // namespace eb
