#include "control/control_token.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "test_support.hpp"

namespace eb {
namespace {

std::string write_file(const std::string& dir, const std::string& name, const std::string& content) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << content;
    return path;
}

TEST(ControlToken, LoadsFromTheFileTrimmed) {
    const std::string dir = test::make_temp_dir();
    const auto loaded = Control_token::load(write_file(dir, "token", "  s3cret-token\n\n"), "ignored-env");
    const auto* token = std::get_if<Control_token>(&loaded);
    ASSERT_NE(token, nullptr) << std::get<std::string>(loaded);
    EXPECT_TRUE(token->configured());
    EXPECT_TRUE(token->matches("s3cret-token")) << "the file wins over the environment";
    EXPECT_FALSE(token->matches("ignored-env"));
    EXPECT_FALSE(token->matches("  s3cret-token\n\n"));
}

TEST(ControlToken, FileErrorsNameThePath) {
    const std::string dir = test::make_temp_dir();
    struct Case {
        std::string path, error;
    };
    const Case cases[] = {
        {dir + "/absent", "--token-file " + dir + "/absent: cannot open: No such file or directory"},
        {write_file(dir, "empty", " \n\t\n"), "--token-file " + dir + "/empty: the file is empty; write the token"},
        {write_file(dir, "two", "one two\n"), "--token-file " + dir + "/two: the token holds whitespace"},
        {write_file(dir, "big", std::string(5000, 'x')), "--token-file " + dir + "/big: larger than 4096 bytes"},
        {dir, "--token-file " + dir + ": cannot read: Is a directory"},
    };
    for (const auto& c : cases) {
        const auto loaded = Control_token::load(c.path, "env-token");
        const auto* error = std::get_if<std::string>(&loaded);
        ASSERT_NE(error, nullptr) << c.path;
        EXPECT_TRUE(error->starts_with(c.error)) << *error;
    }
}

TEST(ControlToken, LoadsFromTheEnvironmentWithoutAFile) {
    const auto from_env = Control_token::load(std::nullopt, " env-token\n");
    ASSERT_TRUE(std::holds_alternative<Control_token>(from_env));
    EXPECT_TRUE(std::get<Control_token>(from_env).matches("env-token"));

    for (const char* none : {static_cast<const char*>(nullptr), "", "  \n"}) {
        const auto loaded = Control_token::load(std::nullopt, none);
        ASSERT_TRUE(std::holds_alternative<Control_token>(loaded));
        EXPECT_FALSE(std::get<Control_token>(loaded).configured()) << "no token: the control API is off";
        EXPECT_FALSE(std::get<Control_token>(loaded).matches(""));
    }
    const auto bad = Control_token::load(std::nullopt, "two words");
    ASSERT_TRUE(std::holds_alternative<std::string>(bad));
    EXPECT_TRUE(std::get<std::string>(bad).starts_with("EB_CONTROL_TOKEN: ")) << std::get<std::string>(bad);
}

TEST(ControlToken, MatchesOnlyTheWholeToken) {
    const Control_token token("abcdef");
    EXPECT_TRUE(token.matches("abcdef"));
    for (const std::string_view wrong : {"", "abcde", "abcdefg", "abcdeF", "xbcdef", "abcdefabcdef", "ABCDEF"})
        EXPECT_FALSE(token.matches(wrong)) << wrong;
    EXPECT_FALSE(Control_token().matches("")) << "nothing matches when no token is configured";
}

TEST(ControlToken, ReadsBearerAuthorization) {
    struct Case {
        std::string_view header;
        std::optional<std::string_view> token;
    };
    const Case cases[] = {
        {"Bearer abc", "abc"},   {"bearer abc", "abc"},  {"BEARER  abc  ", "abc"}, {"Bearer\tabc", "abc"},
        {"Bearer", std::nullopt}, {"Bearer ", std::nullopt}, {"Bearerabc", std::nullopt},
        {"Basic YWJj", std::nullopt}, {"", std::nullopt}, {"abc", std::nullopt},
    };
    for (const auto& c : cases) EXPECT_EQ(bearer_token(c.header), c.token) << c.header;
}

}  // namespace
}  // namespace eb
