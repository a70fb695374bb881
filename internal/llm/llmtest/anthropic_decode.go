package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// The Anthropic Messages request, as much of it as the fake understands.
type aRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	Messages  []aMessage      `json:"messages"`
	System    json.RawMessage `json:"system"`
	Tools     []aTool         `json:"tools"`
	Stream    bool            `json:"stream"`
}

type aMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	Source       *aSource        `json:"source"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type aSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type aTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Type         string          `json:"type"`
	CacheControl json.RawMessage `json:"cache_control"`
	// The computer-use tool's fields.
	DisplayWidth  json.RawMessage `json:"display_width_px"`
	DisplayHeight json.RawMessage `json:"display_height_px"`
	DisplayNumber json.RawMessage `json:"display_number"`
}

// The computer-use tool the fake serves: its type, name and beta.
const (
	computerType = "computer_20250124"
	computerName = "computer"
	computerBeta = "computer-use-2025-01-24"
)

// maxCacheBreakpoints is the API's limit on blocks with cache_control.
const maxCacheBreakpoints = 4

var toolUseIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// aDecoder checks an Anthropic request and decodes it to the common form.
type aDecoder struct {
	breakpoints int
	beta        []string
}

// decodeAnthropic checks body, sent with the anthropic-beta features beta,
// as the real API would and decodes it.
func decodeAnthropic(body []byte, beta []string) (aRequest, Recorded, error) {
	var req aRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, Recorded{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	rec := Recorded{Format: formatAnthropic, Stream: req.Stream, Model: req.Model, RawBytes: len(body), Body: body, Beta: beta}
	if err := checkAnthropicTop(req); err != nil {
		return req, rec, err
	}
	rec.MaxTokens = *req.MaxTokens
	d := aDecoder{beta: beta}
	var err error
	if rec.System, err = d.system(req.System); err != nil {
		return req, rec, err
	}
	if rec.ToolSpecs, err = d.tools(req.Tools); err != nil {
		return req, rec, err
	}
	for _, t := range rec.ToolSpecs {
		rec.Tools = append(rec.Tools, t.Name)
	}
	if rec.Messages, err = d.messages(req.Messages); err != nil {
		return req, rec, err
	}
	if d.breakpoints > maxCacheBreakpoints {
		return req, rec, fmt.Errorf("a maximum of %d blocks with cache_control may be provided. Found %d", maxCacheBreakpoints, d.breakpoints)
	}
	if len(rec.Tools) == 0 && hasToolBlocks(rec.Messages) {
		return req, rec, fmt.Errorf("requests which include `tool_use` or `tool_result` blocks must define tools")
	}
	if err := CheckPairs(rec.Messages); err != nil {
		return req, rec, err
	}
	return req, rec, checkResultsFirst(rec.Messages)
}

func checkAnthropicTop(req aRequest) error {
	switch {
	case req.Model == "":
		return fmt.Errorf("model: field required")
	case req.MaxTokens == nil:
		return fmt.Errorf("max_tokens: field required")
	case *req.MaxTokens < 1:
		return fmt.Errorf("max_tokens: must be at least 1, got %d", *req.MaxTokens)
	case len(req.Messages) == 0:
		return fmt.Errorf("messages: at least one message is required")
	}
	return nil
}

func (d *aDecoder) cache(raw json.RawMessage) {
	if len(raw) > 0 && string(raw) != "null" {
		d.breakpoints++
	}
}

// system decodes the system prompt: a string or an array of text blocks.
func (d *aDecoder) system(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	blocks, err := contentBlocks(raw)
	if err != nil {
		return "", fmt.Errorf("system: %w", err)
	}
	var parts []string
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil || strings.TrimSpace(*b.Text) == "" {
			return "", fmt.Errorf("system.%d: system blocks must be non-empty text", i)
		}
		d.cache(b.CacheControl)
		parts = append(parts, *b.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// tools checks the tool definitions and returns them.
func (d *aDecoder) tools(tools []aTool) ([]llm.Tool, error) {
	var out []llm.Tool
	seen := map[string]bool{}
	for i, t := range tools {
		var lt llm.Tool
		var err error
		switch t.Type {
		case "", "custom":
			lt, err = customTool(t)
		case computerType:
			lt, err = d.computerTool(t)
		default:
			return nil, fmt.Errorf("tools.%d: llmtest does not serve tool type %q", i, t.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("tools.%d.%w", i, err)
		}
		if seen[lt.Name] {
			return nil, fmt.Errorf("tools: tool names must be unique: %q", lt.Name)
		}
		seen[lt.Name] = true
		d.cache(t.CacheControl)
		out = append(out, lt)
	}
	return out, nil
}

func customTool(t aTool) (llm.Tool, error) {
	if !validToolName(t.Name) {
		return llm.Tool{}, fmt.Errorf("name: %q does not match ^[a-zA-Z0-9_-]{1,64}$", t.Name)
	}
	if err := checkSchema(t.InputSchema); err != nil {
		return llm.Tool{}, fmt.Errorf("input_schema: %w", err)
	}
	return llm.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, nil
}

// computerTool checks Anthropic's computer-use tool as the API does: it
// needs its beta, the name "computer" and the display's size, and takes
// no description or schema of the caller's.
func (d *aDecoder) computerTool(t aTool) (llm.Tool, error) {
	if !slices.Contains(d.beta, computerBeta) {
		return llm.Tool{}, fmt.Errorf("type: Input tag %q found using 'type' does not match any of the expected tags "+
			"(the tool needs the anthropic-beta header %q)", computerType, computerBeta)
	}
	if t.Name != computerName {
		return llm.Tool{}, fmt.Errorf("%s.name: Input should be %q", computerType, computerName)
	}
	if len(t.InputSchema) > 0 || t.Description != "" {
		return llm.Tool{}, fmt.Errorf("%s: Extra inputs are not permitted (input_schema, description)", computerType)
	}
	n := &llm.NativeTool{Kind: llm.NativeKindComputer}
	var err error
	if n.DisplayWidth, err = pixels(t.DisplayWidth, "display_width_px", true); err != nil {
		return llm.Tool{}, err
	}
	if n.DisplayHeight, err = pixels(t.DisplayHeight, "display_height_px", true); err != nil {
		return llm.Tool{}, err
	}
	if n.DisplayNumber, err = pixels(t.DisplayNumber, "display_number", false); err != nil {
		return llm.Tool{}, err
	}
	return llm.Tool{Name: t.Name, Native: n}, nil
}

// pixels decodes a whole number field of the computer tool: positive if
// required, else absent or not negative.
func pixels(raw json.RawMessage, field string, required bool) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		if required {
			return 0, fmt.Errorf("%s.%s: Field required", computerType, field)
		}
		return 0, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("%s.%s: Input should be a valid integer, got %s", computerType, field, clip(string(raw), 40))
	}
	switch {
	case required && n < 1:
		return 0, fmt.Errorf("%s.%s: Input should be greater than or equal to 1", computerType, field)
	case n < 0:
		return 0, fmt.Errorf("%s.%s: Input should be greater than or equal to 0", computerType, field)
	}
	return n, nil
}

// messages decodes and checks every message.
func (d *aDecoder) messages(msgs []aMessage) ([]llm.Message, error) {
	out := make([]llm.Message, 0, len(msgs))
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("messages.%d.role: must be \"user\" or \"assistant\", got %q", i, m.Role)
		}
		blocks, err := contentBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		final := i == len(msgs)-1 && m.Role == "assistant"
		if len(blocks) == 0 && !final {
			return nil, fmt.Errorf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		msg := llm.Message{Role: llm.Role(m.Role)}
		for j, b := range blocks {
			lb, err := d.block(llm.Role(m.Role), b)
			if err != nil {
				return nil, fmt.Errorf("messages.%d.content.%d: %w", i, j, err)
			}
			msg.Content = append(msg.Content, lb)
		}
		out = append(out, msg)
	}
	return out, nil
}

// contentBlocks decodes content: a string (one text block) or an array.
func contentBlocks(raw json.RawMessage) ([]aBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("field required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []aBlock{{Type: "text", Text: &s}}, nil
	}
	var blocks []aBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("must be a string or an array of content blocks: %w", err)
	}
	return blocks, nil
}

// block checks one content block of a message of role and decodes it.
func (d *aDecoder) block(role llm.Role, b aBlock) (llm.Block, error) {
	d.cache(b.CacheControl)
	switch b.Type {
	case "text":
		if b.Text == nil || strings.TrimSpace(*b.Text) == "" {
			return llm.Block{}, fmt.Errorf("text content blocks must contain non-whitespace text")
		}
		return llm.Block{Type: llm.BlockText, Text: *b.Text}, nil
	case "image":
		if role != llm.RoleUser {
			return llm.Block{}, fmt.Errorf("image blocks are only allowed in user messages")
		}
		img, err := decodeImage(b.Source)
		return llm.Block{Type: llm.BlockImage, Images: []llm.Image{img}}, err
	case "tool_use":
		return toolUse(role, b)
	case "tool_result":
		return d.toolResult(role, b)
	}
	return llm.Block{}, fmt.Errorf("llmtest does not serve content block type %q", b.Type)
}

func toolUse(role llm.Role, b aBlock) (llm.Block, error) {
	switch {
	case role != llm.RoleAssistant:
		return llm.Block{}, fmt.Errorf("tool_use blocks are only allowed in assistant messages")
	case !toolUseIDPattern.MatchString(b.ID):
		return llm.Block{}, fmt.Errorf("id: %q does not match ^[a-zA-Z0-9_-]+$", b.ID)
	case b.Name == "":
		return llm.Block{}, fmt.Errorf("name: field required")
	case !isObject(b.Input):
		return llm.Block{}, fmt.Errorf("input: must be a JSON object, got %s", clip(string(b.Input), 100))
	}
	return llm.Block{Type: llm.BlockToolUse, ID: b.ID, Name: b.Name, Input: b.Input}, nil
}

func (d *aDecoder) toolResult(role llm.Role, b aBlock) (llm.Block, error) {
	if role != llm.RoleUser {
		return llm.Block{}, fmt.Errorf("tool_result blocks are only allowed in user messages")
	}
	if b.ToolUseID == "" {
		return llm.Block{}, fmt.Errorf("tool_use_id: field required")
	}
	out := llm.Block{Type: llm.BlockToolResult, ID: b.ToolUseID, IsError: b.IsError}
	if len(b.Content) == 0 || string(b.Content) == "null" {
		return out, nil
	}
	inner, err := contentBlocks(b.Content)
	if err != nil {
		return llm.Block{}, fmt.Errorf("content: %w", err)
	}
	var texts []string
	for k, c := range inner {
		d.cache(c.CacheControl)
		switch {
		case c.Type == "text" && c.Text != nil && *c.Text != "":
			texts = append(texts, *c.Text)
		case c.Type == "image":
			img, err := decodeImage(c.Source)
			if err != nil {
				return llm.Block{}, fmt.Errorf("content.%d: %w", k, err)
			}
			out.Images = append(out.Images, img)
		default:
			return llm.Block{}, fmt.Errorf("content.%d: tool_result content must be non-empty text or image blocks, got %q", k, c.Type)
		}
	}
	out.Text = strings.Join(texts, "\n")
	return out, nil
}

// decodeImage checks a base64 image source.
func decodeImage(src *aSource) (llm.Image, error) {
	if src == nil || src.Type != "base64" {
		return llm.Image{}, fmt.Errorf("source: llmtest serves base64 image sources only")
	}
	if !validMediaTypes[src.MediaType] {
		return llm.Image{}, fmt.Errorf("source.media_type: %q is not one of image/jpeg, image/png, image/gif, image/webp", src.MediaType)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	if err != nil || len(data) == 0 {
		return llm.Image{}, fmt.Errorf("source.data: invalid or empty base64 data")
	}
	return llm.Image{MediaType: src.MediaType, Data: data}, nil
}

func hasToolBlocks(msgs []llm.Message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolUse || b.Type == llm.BlockToolResult {
				return true
			}
		}
	}
	return false
}
