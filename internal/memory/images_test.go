package memory

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
)

var shot = llm.Image{MediaType: "image/png", Data: []byte("png")}

// screenshots is a task with an image, then steps of one computer call
// each answered with a screenshot.
func screenshots(steps int) []llm.Message {
	h := []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{
		{Type: llm.BlockText, Text: taskText}, {Type: llm.BlockImage, Images: []llm.Image{shot}}}}}
	for s := 1; s <= steps; s++ {
		id := fmt.Sprintf("toolu_%d", s)
		h = append(h,
			llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: id, Name: "computer", Input: []byte(`{"action":"screenshot"}`)}}},
			llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ID: id, Text: "Screenshot (1024x768).", Images: []llm.Image{shot}}}})
	}
	return h
}

func TestKeepRecentImages(t *testing.T) {
	h := screenshots(5)
	before := fmt.Sprint(h)
	got := KeepRecentImages(h, MaxImages)
	if fmt.Sprint(h) != before {
		t.Fatal("the history was modified")
	}
	if n := countImages(got); n != 3 {
		t.Fatalf("%d images kept, want 3", n)
	}
	want := map[int]string{
		0: "[image from the task omitted: only the 3 most recent images are kept]",
		2: "Screenshot (1024x768).\n[screenshot from step 1 omitted: only the 3 most recent images are kept]",
		4: "Screenshot (1024x768).\n[screenshot from step 2 omitted: only the 3 most recent images are kept]",
	}
	for i, text := range want {
		var b llm.Block
		if i == 0 {
			b = got[0].Content[1]
		} else {
			b = got[i].Content[0]
		}
		if b.Text != text || len(b.Images) != 0 {
			t.Errorf("message %d: %+v, want %q", i, b, text)
		}
	}
	for _, i := range []int{6, 8, 10} {
		if b := got[i].Content[0]; len(b.Images) != 1 || strings.Contains(b.Text, "omitted") {
			t.Errorf("message %d lost its image: %+v", i, b)
		}
	}
	if same := KeepRecentImages(screenshots(2), MaxImages); countImages(same) != 3 {
		t.Error("three images in all should all be kept")
	}
}

// TestKeepRecentImagesInOneBlock: a result of several images keeps its
// last ones; steps are numbered after the condensed ones.
func TestKeepRecentImagesInOneBlock(t *testing.T) {
	h := []llm.Message{task(),
		{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "a", Name: "python", Input: []byte(`{}`)}}},
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ID: "a", Text: "plots", Images: []llm.Image{
			{MediaType: "image/png", Data: []byte("1")}, {MediaType: "image/png", Data: []byte("2")},
			{MediaType: "image/png", Data: []byte("3")}, {MediaType: "image/png", Data: []byte("4")}}}}},
		{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "Look:"}}},
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockImage, Images: []llm.Image{
			{MediaType: "image/png", Data: []byte("5")}, {MediaType: "image/png", Data: []byte("6")}}}}},
	}
	got := keepRecentImages(h, MaxImages, 10)
	res := got[2].Content[0]
	if res.Text != "plots\n[3 images from step 11 omitted: only the 3 most recent images are kept]" ||
		!reflect.DeepEqual(res.Images, h[2].Content[0].Images[3:]) {
		t.Errorf("result %+v", res)
	}
	if c := got[4].Content; len(c) != 1 || len(c[0].Images) != 2 {
		t.Errorf("last message %+v", c)
	}
	got = keepRecentImages(h, 1, 10)
	if c := got[4].Content; len(c) != 2 || c[0].Text != "[image from step 12 omitted: only the 3 most recent images are kept]" ||
		string(c[1].Images[0].Data) != "6" {
		t.Errorf("last message %+v", c)
	}
}

// TestAssembleKeepsThreeImages: however large the budget, a prompt carries
// the three latest images, and its estimate counts only them.
func TestAssembleKeepsThreeImages(t *testing.T) {
	m := newManager(t, Config{Window: 1_000_000})
	h := screenshots(8)
	p, _, cs, err := m.Assemble(context.Background(), h, State{}, nil)
	if err != nil || len(cs) != 0 {
		t.Fatalf("Assemble: %v %v", err, cs)
	}
	checkPrompt(t, m, p)
	if n := countImages(p.Messages); n != 3 {
		t.Errorf("%d images, want 3", n)
	}
	last := p.Messages[len(p.Messages)-1].Content[0]
	if len(last.Images) != 1 {
		t.Error("the latest screenshot is not in the prompt")
	}
	if !strings.Contains(p.Messages[len(p.Messages)-7].Content[0].Text, "screenshot from step 5 omitted") {
		t.Errorf("step 5: %+v", p.Messages[len(p.Messages)-7].Content[0])
	}
	a := &assembly{m: m, c: &m.cache, h: h}
	if est := a.tokens(State{}); est < p.Estimate || est > p.Estimate+20 {
		t.Errorf("the planning estimate %d is not the prompt's %d", est, p.Estimate)
	}
}
