package client

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func readFrames(t *testing.T, r io.Reader) ([]sseFrame, *sseReader, error) {
	t.Helper()
	return readFramesMax(t, r, maxSSELine)
}

func readFramesMax(t *testing.T, r io.Reader, maxLine int) ([]sseFrame, *sseReader, error) {
	t.Helper()
	rd := newSSEReader(r, maxLine)
	var frames []sseFrame
	for {
		f, err := rd.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return frames, rd, err
		}
		frames = append(frames, f)
	}
}

func TestSSEFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []sseFrame
	}{
		{"one frame", "id: 1\nevent: agent.message\ndata: {\"a\":1}\n\n",
			[]sseFrame{{Event: "agent.message", Data: `{"a":1}`, ID: "1"}}},
		{"comments and keep-alives are skipped", ": ping\n\n:\nevent: x\n: inside\ndata: d\n\n",
			[]sseFrame{{Event: "x", Data: "d"}}},
		{"multi-line data joins with LF", "data: a\ndata:b\ndata:  c\n\n",
			[]sseFrame{{Data: "a\nb\n c"}}},
		{"empty data line counts", "data\n\ndata:\ndata:\n\n",
			[]sseFrame{{Data: ""}, {Data: "\n"}}},
		{"CRLF and CR line ends", "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r",
			[]sseFrame{{Event: "a", Data: "1"}, {Event: "b", Data: "2"}}},
		{"id persists, event does not", "id: 7\nevent: a\ndata: x\n\ndata: y\n\nid\ndata: z\n\n",
			[]sseFrame{{Event: "a", Data: "x", ID: "7"}, {Data: "y", ID: "7"}, {Data: "z", ID: ""}}},
		{"frame without data is not dispatched", "event: a\nid: 3\n\ndata: x\n\n",
			[]sseFrame{{Data: "x", ID: "3"}}},
		{"id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			[]sseFrame{{Data: "a", ID: "1"}, {Data: "b", ID: "1"}}},
		{"unterminated frame at EOF is dropped", "data: a\n\ndata: cut",
			[]sseFrame{{Data: "a"}}},
		{"leading BOM", "\uFEFFdata: a\n\n",
			[]sseFrame{{Data: "a"}}},
		{"unknown fields ignored, colon in value kept", "foo: bar\ndata: http://x:1\n\n",
			[]sseFrame{{Data: "http://x:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := readFrames(t, strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("frames = %+v\nwant     %+v", got, tc.want)
			}
			// The same bytes delivered one at a time (a slow network, a CRLF
			// split across reads) give the same frames.
			got, _, err = readFrames(t, iotest.OneByteReader(strings.NewReader(tc.in)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("byte by byte: frames = %+v\nwant                  %+v", got, tc.want)
			}
		})
	}
}

func TestSSERetryField(t *testing.T) {
	_, rd, err := readFrames(t, strings.NewReader("retry: 2500\ndata: a\n\nretry: soon\n\n"))
	if err != nil || rd.retry != 2500*time.Millisecond {
		t.Errorf("retry = %v, %v; want 2.5s (an invalid value is ignored)", rd.retry, err)
	}
}

func TestSSELongLineAndLimit(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	got, _, err := readFrames(t, strings.NewReader("data: "+long+"\n\n"))
	if err != nil || len(got) != 1 || got[0].Data != long {
		t.Fatalf("a 1 MiB data line: %d frames, %v", len(got), err)
	}
	_, _, err = readFramesMax(t, strings.NewReader("data: "+strings.Repeat("y", 4096)+"\n\n"), 1024)
	if err == nil || !strings.Contains(err.Error(), "exceeds 1024 bytes") {
		t.Errorf("an endless line: err = %v, want a clear limit error", err)
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("connection reset")
	got, _, err := readFrames(t, io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	if len(got) != 1 || !errors.Is(err, boom) {
		t.Errorf("frames %+v, err %v: want the complete frame, then the read error", got, err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("id: 1\nevent: a\ndata: x\n\n")
	f.Add("data: a\r\ndata: b\r\r\n\n:c\n")
	f.Fuzz(func(t *testing.T, in string) {
		frames, _, err := readFrames(t, strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		// Line splitting must not depend on how the bytes arrive.
		again, _, err := readFrames(t, iotest.OneByteReader(strings.NewReader(in)))
		if err != nil || !reflect.DeepEqual(frames, again) {
			t.Fatalf("whole: %+v\nbyte by byte: %+v (%v)", frames, again, err)
		}
		for _, fr := range frames {
			if strings.ContainsAny(fr.Event, "\r\n") || strings.ContainsAny(fr.ID, "\r\n\x00") {
				t.Fatalf("frame field holds a line break or NUL: %+v", fr)
			}
		}
	})
}
