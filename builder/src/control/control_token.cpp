#include "control/control_token.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.hpp"
#include "base/socket.hpp"

namespace eb {
namespace {

// A token is a line of a secret; anything bigger is not one.
constexpr std::size_t max_token_file_bytes = 4096;

std::string_view trimmed(std::string_view text) {
    constexpr std::string_view space = " \t\r\n\f\v";
    const std::size_t first = text.find_first_not_of(space);
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// Whitespace or control bytes inside the token could never be sent in a header.
bool sendable(std::string_view token) {
    for (const char c : token)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
    return true;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

}  // namespace

std::variant<Control_token, std::string> Control_token::load(const std::optional<std::string>& token_file,
                                                             const char* env_value) {
    if (!token_file) {
        const std::string_view token = trimmed(env_value ? env_value : "");
        if (!sendable(token))
            return std::string("EB_CONTROL_TOKEN: the token holds whitespace or control characters; "
                               "set it to one word");
        return Control_token(std::string(token));
    }

    const std::string where = "--token-file " + *token_file;
    const Fd file(::open(token_file->c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) return where + ": cannot open: " + error_text(errno) + "; point it at a readable file with the token";
    std::string content;
    char chunk[1024];
    while (true) {
        const ssize_t got = ::read(file.get(), chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return where + ": cannot read: " + error_text(errno) + "; point it at a readable file with the token";
        if (got == 0) break;
        content.append(chunk, static_cast<std::size_t>(got));
        if (content.size() > max_token_file_bytes)
            return where + ": larger than " + std::to_string(max_token_file_bytes) +
                   " bytes; the file must hold just the token";
    }
    const std::string_view token = trimmed(content);
    if (token.empty()) return where + ": the file is empty; write the token into it";
    if (!sendable(token))
        return where + ": the token holds whitespace or control characters; the file must hold one word";
    return Control_token(std::string(token));
}

bool Control_token::matches(std::string_view presented) const {
    if (token_.empty()) return false;
    // Every byte of `presented` is compared, whatever differs where: no early
    // exit whose timing would tell an attacker how much of a guess was right.
    unsigned difference = presented.size() == token_.size() ? 0u : 1u;
    for (std::size_t i = 0; i < presented.size(); ++i)
        difference |= static_cast<unsigned char>(presented[i]) ^ static_cast<unsigned char>(token_[i % token_.size()]);
    return difference == 0;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
    constexpr std::string_view scheme = "bearer";
    authorization = trimmed(authorization);
    if (authorization.size() <= scheme.size() || !equal_ignoring_case(authorization.substr(0, scheme.size()), scheme))
        return std::nullopt;
    const std::string_view rest = authorization.substr(scheme.size());
    if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;  // "Bearerx" is another scheme
    const std::string_view token = trimmed(rest);
    if (token.empty()) return std::nullopt;
    return token;
}

}  // namespace eb
