#include "transport/injected_fault.hpp"

#include <charconv>

namespace eb {
namespace {

constexpr std::string_view form = "qp-error:R:N or short-mfp:R:N (R a peer's rank, N >= 1 its N-th data message)";

template <typename Number>
bool read_number(std::string_view text, Number& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc{} && end == text.data() + text.size();
}

}  // namespace

std::variant<Injected_fault, std::string> parse_injected_fault(std::string_view text) {
    const std::string error = "--inject-fault '" + std::string(text) + "': expected " + std::string(form);
    const std::size_t first = text.find(':');
    const std::size_t second = first == std::string_view::npos ? first : text.find(':', first + 1);
    if (second == std::string_view::npos) return error;
    Injected_fault fault;
    const std::string_view kind = text.substr(0, first);
    if (kind == "qp-error") fault.kind = Injected_fault::Kind::qp_error;
    else if (kind == "short-mfp") fault.kind = Injected_fault::Kind::short_mfp;
    else return error;
    if (!read_number(text.substr(first + 1, second - first - 1), fault.peer) ||
        !read_number(text.substr(second + 1), fault.after) || fault.after == 0)
        return error;
    return fault;
}

std::string injected_fault_text(const Injected_fault& fault) {
    return std::string(fault.kind == Injected_fault::Kind::qp_error ? "qp-error" : "short-mfp") + ":" +
           std::to_string(fault.peer) + ":" + std::to_string(fault.after);
}

}  // namespace eb
