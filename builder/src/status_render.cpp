#include "status_render.hpp"

#include <cstdio>

namespace eb {
namespace {

std::string json_string(std::string_view text) {
    std::string quoted = "\"";
    for (const char c : text) {
        switch (c) {
            case '"': quoted += "\\\""; break;
            case '\\': quoted += "\\\\"; break;
            case '\n': quoted += "\\n"; break;
            case '\r': quoted += "\\r"; break;
            case '\t': quoted += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
                    quoted += escaped;
                } else {
                    quoted += c;
                }
        }
    }
    return quoted + "\"";
}

void add_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                std::uint64_t value) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
    out.append(name).append(" ").append(std::to_string(value)).append("\n");
}

}  // namespace

std::string status_json(const Status_snapshot& status) {
    return "{\"rank\":" + std::to_string(status.rank) + ",\"units\":" + std::to_string(status.units) +
           ",\"state\":" + json_string(state_name(status.state)) +
           ",\"events_built\":" + std::to_string(status.events_built) +
           ",\"events_incomplete\":" + std::to_string(status.events_incomplete) +
           ",\"meps_built\":" + std::to_string(status.meps_built) +
           ",\"bytes_built\":" + std::to_string(status.bytes_built) +
           ",\"last_error\":" + json_string(status.last_error) + "}";
}

std::string prometheus_metrics(const Status_snapshot& status) {
    std::string out;
    add_metric(out, "eb_events_built_total", "counter", "Events built complete and verified.",
               status.events_built);
    add_metric(out, "eb_events_incomplete_total", "counter",
               "Events that failed a check (missing source, wrong id, payload mismatch).",
               status.events_incomplete);
    add_metric(out, "eb_meps_built_total", "counter", "MEPs assembled and handed to the consumer.",
               status.meps_built);
    add_metric(out, "eb_bytes_built_total", "counter", "Bytes of the MEPs assembled.", status.bytes_built);
    out.append("# HELP eb_parse_errors_total MFPs and MEPs rejected as malformed, by reason.\n"
               "# TYPE eb_parse_errors_total counter\n");
    for (std::size_t kind = 1; kind < parse_error_kinds; ++kind)
        out.append("eb_parse_errors_total{error=\"")
            .append(parse_error_name(static_cast<Parse_error>(kind)))
            .append("\"} ")
            .append(std::to_string(status.parse_errors[kind]))
            .append("\n");
    add_metric(out, "eb_up", "gauge", "1 while the unit is RUNNING (building events), else 0.",
               status.state == Unit_state::running ? 1 : 0);
    return out;
}

}  // namespace eb
