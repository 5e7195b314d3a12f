#include "telemetry/status_render.hpp"

#include <cstdio>

#include "base/json_text.hpp"

namespace eb {
namespace {

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return text;
}

void add_help(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void add_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                const std::string& value) {
    add_help(out, name, type, help);
    out.append(name).append(" ").append(value).append("\n");
}

void add_sample(std::string& out, std::string_view name, std::string_view label, std::string_view label_value,
                const std::string& value) {
    out.append(name).append("{").append(label).append("=\"").append(label_value).append("\"} ").append(value).append(
        "\n");
}

std::string transport_json(const Transport_report& transport) {
    std::string json = "{\"kind\":" + json_string(transport.kind);
    if (transport.kind != "verbs") return json + "}";
    json += ",\"device\":" + json_string(transport.device) + ",\"port\":" + std::to_string(transport.port) +
            ",\"gid_index\":" + std::to_string(transport.gid_index) +
            ",\"port_state\":" + json_string(transport.port_state) +
            ",\"link_layer\":" + json_string(transport.link_layer) + ",\"peers\":[";
    for (std::size_t i = 0; i < transport.peers.size(); ++i)
        json += (i == 0 ? "" : ",") + std::string("{\"rank\":") + std::to_string(transport.peers[i].rank) +
                ",\"qp_state\":" + json_string(transport.peers[i].qp_state) + "}";
    return json + "]}";
}

std::string consumer_json(const std::optional<Consumer_counts>& consumer) {
    if (!consumer) return "null";
    return "{\"meps\":" + std::to_string(consumer->meps) + ",\"events_complete\":" +
           std::to_string(consumer->events_complete) + ",\"events_incomplete\":" +
           std::to_string(consumer->events_incomplete) + ",\"rejected\":" + std::to_string(consumer->rejected) +
           "}";
}

}  // namespace

std::string status_json(const Status_snapshot& status) {
    std::string peers = "[", lost = "[", reached = "[";
    for (Rank peer = 0; peer < status.peers.size(); ++peer) {
        peers += (peer == 0 ? "" : ",") + std::string("{\"rank\":") + std::to_string(peer) +
                 ",\"state\":" + json_string(link_state_name(status.peers[peer])) + "}";
        if (status.peers[peer] != Link_state::lost) continue;
        lost += (lost.size() == 1 ? "" : ",") + std::to_string(peer);
        if (peer < status.lost_reached.size() && status.lost_reached[peer])
            reached += (reached.size() == 1 ? "" : ",") + std::to_string(peer);
    }
    std::string refused = "{";
    for (std::size_t kind = 0; kind < refusal_kinds; ++kind)
        refused += (kind == 0 ? "" : ",") + json_string(refusal_name(static_cast<Refusal>(kind))) + ":" +
                   std::to_string(status.refusals[kind]);
    std::string allowed = "[";
    for (const Command command : allowed_commands(status.state))
        allowed += (allowed.size() == 1 ? "" : ",") + json_string(command_name(command));
    return "{\"rank\":" + std::to_string(status.rank) + ",\"units\":" + std::to_string(status.units) +
           ",\"state\":" + json_string(control_state_name(status.state)) +
           ",\"activity\":" + json_string(status.activity) +
           ",\"role\":" + json_string(status.epoch == 0 ? "unconfigured" : status.live ? "live" : "dummy") +
           ",\"epoch\":" + std::to_string(status.epoch) + ",\"pending_epoch\":" + std::to_string(status.pending_epoch) +
           ",\"next_event\":" + std::to_string(status.next_event) +
           ",\"events_built\":" + std::to_string(status.events_built) +
           ",\"events_incomplete\":" + std::to_string(status.events_incomplete) +
           ",\"events_dropped\":" + std::to_string(status.events_dropped) +
           ",\"events_in_doubt\":" + std::to_string(status.events_in_doubt) +
           ",\"meps_built\":" + std::to_string(status.meps_built) +
           ",\"meps_discarded\":" + std::to_string(status.meps_discarded) +
           ",\"output_stalled_seconds\":" + number(status.output_stalled_seconds) +
           ",\"bytes_built\":" + std::to_string(status.bytes_built) +
           ",\"building_seconds\":" + number(status.building_seconds) +
           ",\"network_bytes_sent\":" + std::to_string(status.network_bytes_sent) +
           ",\"network_bytes_received\":" + std::to_string(status.network_bytes_received) +
           ",\"network_seconds\":" + number(status.network_seconds) +
           ",\"network_sends_held\":" + std::to_string(status.network_sends_held) +
           ",\"network_send_held_seconds\":" + number(status.network_send_held_seconds) +
           ",\"events_per_second\":" + number(status.events_per_second) +
           ",\"bytes_per_second\":" + number(status.bytes_per_second) + ",\"peers\":" + peers +
           "],\"lost_peers\":" + lost + "],\"lost_peers_reachable\":" + (status.probing ? reached + "]" : "null") + ",\"data_refusals\":" + refused + "},\"consumer\":" + consumer_json(status.consumer) +
           ",\"numa\":" + status.numa_json +
           ",\"transport\":" + transport_json(status.transport) + ",\"allowed\":" + allowed +
           "],\"last_error\":" + json_string(status.last_error) + "}";
}

std::string prometheus_metrics(const Status_snapshot& status) {
    std::string out;
    add_metric(out, "eb_events_built_total", "counter", "Events built complete and verified.",
               std::to_string(status.events_built));
    add_metric(out, "eb_events_incomplete_total", "counter",
               "Events delivered flagged incomplete or that failed a check (missing source, wrong id, payload).",
               std::to_string(status.events_incomplete));
    add_metric(out, "eb_events_dropped_total", "counter",
               "Events not delivered: a source or the builder unit was lost, or the output had no room in time.",
               std::to_string(status.events_dropped));
    add_metric(out, "eb_events_in_doubt_total", "counter",
               "Events of chunks whose count this builder unit could not know (it sat a cycle out, unsure of the "
               "proposal the set followed): the set may have counted them dropped, or not.",
               std::to_string(status.events_in_doubt));
    add_metric(out, "eb_meps_built_total", "counter", "MEPs assembled and handed to the consumer.",
               std::to_string(status.meps_built));
    add_metric(out, "eb_meps_discarded_total", "counter",
               "MEPs assembled and dropped by this builder unit because its output had no room in time "
               "(--output-timeout-ms); their events count as dropped.",
               std::to_string(status.meps_discarded));
    add_metric(out, "eb_output_stalled_seconds", "gauge",
               "Building time since this builder unit's output last took a MEP, while every MEP since was dropped "
               "here (its consumer gone or stuck); 0 while the output takes them.",
               number(status.output_stalled_seconds));
    add_metric(out, "eb_bytes_built_total", "counter", "Bytes of the MEPs assembled.",
               std::to_string(status.bytes_built));
    add_metric(out, "eb_building_seconds_total", "counter",
               "Time spent building (connected and moving data; not paused, connecting or idle).",
               number(status.building_seconds));
    add_metric(out, "eb_network_sent_bytes_total", "counter",
               "Bytes the transport sent to other units over the network (sockets or RDMA), counted as moved; "
               "a unit's own MFP, copied locally, is not counted.",
               std::to_string(status.network_bytes_sent));
    add_metric(out, "eb_network_received_bytes_total", "counter",
               "Bytes the transport received from other units over the network, counted as moved.",
               std::to_string(status.network_bytes_received));
    add_metric(out, "eb_network_transfer_seconds_total", "counter",
               "Time spent waiting for data transfers with other units to complete.",
               number(status.network_seconds));
    add_metric(out, "eb_network_sends_held_total", "counter",
               "MFP sends this readout unit held because their builder unit had not yet posted the receive "
               "(verbs: until its credit came; TCP holds none). Many: its builder units are late.",
               std::to_string(status.network_sends_held));
    add_metric(out, "eb_network_send_held_seconds_total", "counter",
               "Time the held MFP sends waited for their builder unit's receive.",
               number(status.network_send_held_seconds));
    add_help(out, "eb_parse_errors_total", "counter", "MFPs and MEPs rejected as malformed, by reason.");
    for (std::size_t kind = 1; kind < parse_error_kinds; ++kind)
        add_sample(out, "eb_parse_errors_total", "error", parse_error_name(static_cast<Parse_error>(kind)),
                   std::to_string(status.parse_errors[kind]));
    add_help(out, "eb_transport_errors_total", "counter", "Peer connections given up on, by kind.");
    for (std::size_t kind = 0; kind < link_failure_kinds; ++kind)
        add_sample(out, "eb_transport_errors_total", "kind", link_failure_name(static_cast<Link_failure>(kind)),
                   std::to_string(status.link_failures[kind]));
    add_help(out, "eb_data_connections_refused_total", "counter",
             "Data connections refused, by reason (key, epoch, table, protocol, slow hello).");
    for (std::size_t kind = 0; kind < refusal_kinds; ++kind)
        add_sample(out, "eb_data_connections_refused_total", "reason", refusal_name(static_cast<Refusal>(kind)),
                   std::to_string(status.refusals[kind]));
    add_metric(out, "eb_peers_lost_total", "counter", "Peers this unit lost (closed, reset or timed out).",
               std::to_string(status.peers_lost));
    add_help(out, "eb_peer_up", "gauge", "1 while the connection to a live peer is up, else 0.");
    for (Rank peer = 0; peer < status.peers.size(); ++peer)
        if (status.peers[peer] != Link_state::dummy && status.peers[peer] != Link_state::self)
            add_sample(out, "eb_peer_up", "peer", std::to_string(peer),
                       status.peers[peer] == Link_state::up ? "1" : "0");
    add_help(out, "eb_state", "gauge", "1 for the unit's control state, 0 for the others.");
    for (const Control_state state : {Control_state::not_ready, Control_state::ready, Control_state::running,
                                      Control_state::paused, Control_state::error})
        add_sample(out, "eb_state", "state", control_state_name(state), status.state == state ? "1" : "0");
    add_help(out, "eb_transport_info", "gauge", "1 for the transport the unit moves data with.");
    add_sample(out, "eb_transport_info", "kind", status.transport.kind, "1");
    if (status.transport.kind == "verbs") {
        add_metric(out, "eb_verbs_port_active", "gauge", "1 while the RDMA port is ACTIVE, else 0.",
                   status.transport.port_state == "ACTIVE" ? "1" : "0");
        add_help(out, "eb_peer_qp_ready", "gauge", "1 while the queue pairs to a connected peer are in RTS, else 0.");
        for (const Transport_report::Peer& peer : status.transport.peers)
            add_sample(out, "eb_peer_qp_ready", "peer", std::to_string(peer.rank), peer.qp_state == "RTS" ? "1" : "0");
    }
    if (status.numa.requested) {
        add_help(out, "eb_numa_local", "gauge",
                 "1 where the unit's CPUs, memory or RDMA device sit on the NUMA node it was asked to run on "
                 "(--numa), else 0.");
        add_sample(out, "eb_numa_local", "resource", "cpus", status.numa.cpus_local ? "1" : "0");
        add_sample(out, "eb_numa_local", "resource", "memory", status.numa.memory_local ? "1" : "0");
        if (status.numa.device_local)
            add_sample(out, "eb_numa_local", "resource", "device", *status.numa.device_local ? "1" : "0");
    }
    add_metric(out, "eb_epoch", "gauge", "Epoch of the rank table the unit runs under (0: none yet).",
               std::to_string(status.epoch));
    if (status.consumer) {
        add_metric(out, "eb_consumer_meps_total", "counter", "MEPs the consumer of this unit's MEP ring has read.",
                   std::to_string(status.consumer->meps));
        add_help(out, "eb_consumer_events_total", "counter",
                 "Events the consumer of this unit's MEP ring has checked, complete or incomplete.");
        add_sample(out, "eb_consumer_events_total", "state", "complete", std::to_string(status.consumer->events_complete));
        add_sample(out, "eb_consumer_events_total", "state", "incomplete",
                   std::to_string(status.consumer->events_incomplete));
        add_metric(out, "eb_consumer_rejected_total", "counter",
                   "MEPs and MFPs the consumer of this unit's MEP ring rejected as malformed.",
                   std::to_string(status.consumer->rejected));
    }
    add_help(out, "eb_ring_fill_ratio", "gauge", "Fraction of a shared-memory ring in use.");
    if (status.mfp_ring_fill >= 0) add_sample(out, "eb_ring_fill_ratio", "ring", "mfp", number(status.mfp_ring_fill));
    if (status.mep_ring_fill >= 0) add_sample(out, "eb_ring_fill_ratio", "ring", "mep", number(status.mep_ring_fill));
    append_prometheus_histogram(out, "eb_phase_duration_seconds", "Time of one linear-shifting phase.",
                                status.phase_time);
    append_prometheus_histogram(out, "eb_barrier_wait_seconds", "Time spent waiting in a barrier.",
                                status.barrier_wait);
    add_metric(out, "eb_up", "gauge", "1 while the unit is RUNNING, else 0.",
               status.state == Control_state::running ? "1" : "0");
    return out;
}

}  // namespace eb
