#include "status_render.hpp"

#include <gtest/gtest.h>

namespace eb {
namespace {

Status_snapshot sample(Unit_state state) {
    return {.rank = 2,
            .units = 4,
            .state = state,
            .events_built = 123000,
            .events_incomplete = 7,
            .meps_built = 123,
            .bytes_built = 70849536,
            .last_error = "rank 1 said \"bye\"\n\tand left\x01",
            .parse_errors = {0, 0, 5}};  // 5 bad_magic
}

TEST(StatusRender, StatusJsonHasEveryFieldWithEscapedError) {
    EXPECT_EQ(status_json(sample(Unit_state::running)),
              R"({"rank":2,"units":4,"state":"RUNNING","events_built":123000,"events_incomplete":7,)"
              R"("meps_built":123,"bytes_built":70849536,"last_error":"rank 1 said \"bye\"\n\tand left\u0001"})");
}

TEST(StatusRender, StatusJsonNamesEveryState) {
    const std::pair<Unit_state, const char*> cases[] = {{Unit_state::connecting, "\"state\":\"CONNECTING\""},
                                                        {Unit_state::running, "\"state\":\"RUNNING\""},
                                                        {Unit_state::stopped, "\"state\":\"STOPPED\""},
                                                        {Unit_state::error, "\"state\":\"ERROR\""}};
    for (const auto& [state, text] : cases)
        EXPECT_NE(status_json(sample(state)).find(text), std::string::npos) << text;
}

TEST(StatusRender, MetricsAreCountersAndAnUpGauge) {
    EXPECT_EQ(prometheus_metrics(sample(Unit_state::running)),
              "# HELP eb_events_built_total Events built complete and verified.\n"
              "# TYPE eb_events_built_total counter\n"
              "eb_events_built_total 123000\n"
              "# HELP eb_events_incomplete_total Events that failed a check (missing source, wrong id, payload mismatch).\n"
              "# TYPE eb_events_incomplete_total counter\n"
              "eb_events_incomplete_total 7\n"
              "# HELP eb_meps_built_total MEPs assembled and handed to the consumer.\n"
              "# TYPE eb_meps_built_total counter\n"
              "eb_meps_built_total 123\n"
              "# HELP eb_bytes_built_total Bytes of the MEPs assembled.\n"
              "# TYPE eb_bytes_built_total counter\n"
              "eb_bytes_built_total 70849536\n"
              "# HELP eb_parse_errors_total MFPs and MEPs rejected as malformed, by reason.\n"
              "# TYPE eb_parse_errors_total counter\n"
              "eb_parse_errors_total{error=\"truncated\"} 0\n"
              "eb_parse_errors_total{error=\"bad_magic\"} 5\n"
              "eb_parse_errors_total{error=\"bad_version\"} 0\n"
              "eb_parse_errors_total{error=\"bad_alignment\"} 0\n"
              "eb_parse_errors_total{error=\"size_mismatch\"} 0\n"
              "eb_parse_errors_total{error=\"fragment_overflow\"} 0\n"
              "eb_parse_errors_total{error=\"trailing_bytes\"} 0\n"
              "eb_parse_errors_total{error=\"wrong_source\"} 0\n"
              "eb_parse_errors_total{error=\"wrong_event_range\"} 0\n"
              "eb_parse_errors_total{error=\"wrong_fragment_count\"} 0\n"
              "eb_parse_errors_total{error=\"bad_offset\"} 0\n"
              "eb_parse_errors_total{error=\"wrong_source_count\"} 0\n"
              "# HELP eb_up 1 while the unit is RUNNING (building events), else 0.\n"
              "# TYPE eb_up gauge\n"
              "eb_up 1\n");
    for (const Unit_state state : {Unit_state::connecting, Unit_state::stopped, Unit_state::error})
        EXPECT_NE(prometheus_metrics(sample(state)).find("\neb_up 0\n"), std::string::npos);
}

}  // namespace
}  // namespace eb
