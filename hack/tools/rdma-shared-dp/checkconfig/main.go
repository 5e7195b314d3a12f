// Command checkconfig reads an RDMA shared device plugin config.json with
// the plugin's own code (ReadConfig, then ValidateConfigs, as the plugin
// does at start) and prints the resources it would advertise, or the
// plugin's error.
// Usage: checkconfig CONFIG_JSON
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/Mellanox/k8s-rdma-shared-dev-plugin/pkg/resources"
	"github.com/Mellanox/k8s-rdma-shared-dev-plugin/pkg/types"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checkconfig CONFIG_JSON")
		os.Exit(2)
	}
	log.SetOutput(io.Discard) // the plugin logs every step; keep its verdict only
	manager := resources.NewResourceManager(os.Args[1], false)
	if err := manager.ReadConfig(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: the RDMA shared device plugin cannot read it: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	if err := manager.ValidateConfigs(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: the RDMA shared device plugin refuses it: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	// What it would advertise: prefix/name per entry (the prefix defaulted as the plugin does).
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var config types.UserConfigList
	if err := json.Unmarshal(raw, &config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, c := range config.ConfigList {
		prefix := c.ResourcePrefix
		if prefix == "" {
			prefix = "rdma"
		}
		fmt.Printf("%s/%s\n", prefix, c.ResourceName)
	}
}
