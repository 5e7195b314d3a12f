package testenv

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// portsFile records the ports handed out to tests in the last minute; the
// builder's C++ tests (builder/tests/test_support.cpp, free_ports) use the
// same file, lock and format, so Go and C++ tests running at once never
// get the same port.
const portsFile = "/tmp/eb-test-ports"

// FreePorts returns n distinct loopback TCP ports that are free now, for
// processes a test starts to listen on later. They come from below the
// kernel's ephemeral range: a port picked by listening on :0 and closing
// is an ephemeral one, which any outgoing connection (the test's own HTTP
// clients) may take as its source port before the process binds it
// ("Address already in use"). A port handed out in the last minute is not
// handed out again.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := PickFreePorts(n)
	if err != nil {
		t.Fatalf("choosing %d free ports: %v", n, err)
	}
	return ports
}

// PickFreePorts is FreePorts for a program that is not a test (the farm
// harness), returning the error.
func PickFreePorts(n int) ([]int, error) {
	now := time.Now()
	low := ephemeralLow()
	lock, err := os.OpenFile(portsFile, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("locking %s: %w", portsFile, err)
	}
	recent := map[int]int64{} // port -> when handed out, Unix seconds
	scanner := bufio.NewScanner(lock)
	for scanner.Scan() {
		var port int
		var when int64
		if _, err := fmt.Sscan(scanner.Text(), &port, &when); err == nil && now.Unix()-when < 60 {
			recent[port] = when
		}
	}
	var ports []int
	var held []net.Listener // each port is held until all are found, so none repeats
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for port, tried := 10000+rand.IntN(max(1, low-11000)), 0; len(ports) < n; port, tried = port+1, tried+1 {
		if tried > low {
			return nil, fmt.Errorf("fewer than %d ports free below the ephemeral range (from %d)", n, low)
		}
		if port >= low {
			port = 10000
		}
		if _, taken := recent[port]; taken {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		held = append(held, l)
		ports = append(ports, port)
		recent[port] = now.Unix()
	}
	var record strings.Builder
	for port, when := range recent {
		fmt.Fprintf(&record, "%d %d\n", port, when)
	}
	if err := lock.Truncate(0); err != nil {
		return nil, err
	}
	if _, err := lock.WriteAt([]byte(record.String()), 0); err != nil {
		return nil, err
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	low := 32768
	if text, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(text), &low)
	}
	return low
}
