//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/citest"
)

// cdp is a Chrome DevTools Protocol client over --remote-debugging-pipe
// (messages are JSON separated by NUL bytes on file descriptors 3 and 4):
// no websocket, no port.
type cdp struct {
	w    *os.File
	r    *os.File
	buf  []byte
	next int
}

// call sends one command and returns its result, skipping events.
func (c *cdp) call(session, method string, params any, deadline time.Time) (json.RawMessage, error) {
	c.next++
	id := c.next
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := c.w.Write(append(b, 0)); err != nil {
		return nil, fmt.Errorf("cdp %s: %w", method, err)
	}
	c.r.SetReadDeadline(deadline)
	for {
		if i := bytes.IndexByte(c.buf, 0); i >= 0 {
			frame := c.buf[:i]
			c.buf = c.buf[i+1:]
			var resp struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(frame, &resp); err != nil {
				return nil, fmt.Errorf("cdp: %w", err)
			}
			if resp.ID != id {
				continue
			}
			if resp.Error != nil {
				return nil, fmt.Errorf("cdp %s: %s", method, resp.Error.Message)
			}
			return resp.Result, nil
		}
		chunk := make([]byte, 64<<10)
		n, err := c.r.Read(chunk)
		if err != nil {
			return nil, fmt.Errorf("cdp %s: %w", method, err)
		}
		c.buf = append(c.buf, chunk[:n]...)
	}
}

// startChromium starts headless Chromium on about:blank with a fresh
// profile, or skips the test when none is installed.
func startChromium(t *testing.T) *cdp {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		citest.Missing(t, "no chromium on PATH (Debian: apt-get install chromium); the dashboard's browser test needs one")
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(),
		"--remote-debugging-pipe", "--window-size=1440,1100", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, respW} // fds 3 (commands) and 4 (responses)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	respW.Close()
	t.Cleanup(func() {
		cmdW.Close()
		cmd.Process.Kill()
		cmd.Wait()
		respR.Close()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", stderr.String())
		}
	})
	return &cdp{w: cmdW, r: respR}
}

// TestDashboardInABrowser runs the README's main job (4 ranks, rank 2
// slowed 3×) with --dashboard, loads the page in headless Chromium while
// the job runs, and checks that the page marks rank 2, and only rank 2, as
// the straggler and plots at least 8 steps. RINGTAIL_DASHBOARD_SCREENSHOT
// names a PNG to save the page to (docs/dashboard.png is made so).
func TestDashboardInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ringtail-train and runs a 4-rank job")
	}
	browser := startChromium(t)
	train := filepath.Join(t.TempDir(), "ringtail-train")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", train, "github.com/ringtail-ml/ringtail/cmd/ringtail-train")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ringtail-train: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var out, errb runTestBuffer
	go func() {
		done <- launchMain(ctx, []string{"-np", "4", "--dashboard", addr, "--", train, "--inject", "slow=2:3x", "--epochs", "30"}, &out, &errb)
	}()
	defer func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
	}()

	deadline := time.Now().Add(2 * time.Minute)
	res, err := browser.call("", "Target.createTarget", map[string]any{"url": "http://" + addr + "/"}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	json.Unmarshal(res, &target)
	res, err = browser.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &attached)
	session := attached.SessionID

	const probe = `JSON.stringify({
		steps: +(document.getElementById('steps-shown') || {}).textContent || 0,
		heat: [...document.querySelectorAll('#heat-labels [data-straggler="true"]')].map(e => +e.dataset.rank),
		table: [...document.querySelectorAll('#ranks tr[data-straggler="true"]')].map(e => +e.dataset.rank),
		hosts: [...document.querySelectorAll('#ranks tbody tr')].length,
	})`
	type view struct {
		Steps int   `json:"steps"`
		Heat  []int `json:"heat"`
		Table []int `json:"table"`
		Hosts int   `json:"hosts"`
	}
	var v view
	for {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("the job ended (status %d) before the page showed it: last view %+v", code, v)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed ≥ 8 steps with rank 2 marked: last view %+v", v)
		}
		res, err := browser.call(session, "Runtime.evaluate", map[string]any{"expression": probe, "returnByValue": true}, deadline)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Result struct {
				Value string `json:"value"`
			} `json:"result"`
		}
		json.Unmarshal(res, &ev)
		if ev.Result.Value != "" {
			json.Unmarshal([]byte(ev.Result.Value), &v)
		}
		// Rank 2 (3× slow) marked in the heatmap and the table, which
		// agree. On a loaded machine the controller may also see another
		// rank as slow for a while (and mark it, rightly: it arrived late),
		// so other marks are allowed.
		if v.Steps >= 8 && slices.Contains(v.Heat, 2) && slices.Equal(v.Heat, v.Table) && v.Hosts == 4 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("the page shows %d steps with rank %v marked", v.Steps, v.Heat)
	if shot := os.Getenv("RINGTAIL_DASHBOARD_SCREENSHOT"); shot != "" {
		time.Sleep(8 * time.Second) // more steps and busbw windows for the picture
		res, err := browser.call(session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var img struct {
			Data string `json:"data"`
		}
		json.Unmarshal(res, &img)
		png, err := base64.StdEncoding.DecodeString(img.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
