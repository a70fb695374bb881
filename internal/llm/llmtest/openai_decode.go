package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// errorPrefix marks a failed tool result in the OpenAI format, which has no
// is_error field. It must match the prefix the llm/openai client writes.
const errorPrefix = "Error: "

// The Chat Completions request, as much of it as the fake understands.
type oRequest struct {
	Model         string     `json:"model"`
	Messages      []oMessage `json:"messages"`
	Tools         []oTool    `json:"tools"`
	Stream        bool       `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
}

type oMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oToolCall     `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type oTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// includeUsage reports whether the request asked for a final usage chunk.
func (r oRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// decodeOpenAI checks body as the real API would and decodes it. Tool
// messages become tool_result blocks of one user message, together with
// the user message that follows them (where images of tool results go).
func decodeOpenAI(body []byte) (oRequest, Recorded, error) {
	var req oRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, Recorded{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	rec := Recorded{Format: formatOpenAI, Stream: req.Stream, Model: req.Model, RawBytes: len(body), Body: body}
	if err := checkOpenAITop(req); err != nil {
		return req, rec, err
	}
	for _, n := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if n != nil {
			rec.MaxTokens = *n
		}
	}
	var err error
	if rec.ToolSpecs, err = openAITools(req.Tools); err != nil {
		return req, rec, err
	}
	for _, t := range rec.ToolSpecs {
		rec.Tools = append(rec.Tools, t.Name)
	}
	var d oDecoder
	for i, m := range req.Messages {
		if err := d.message(m); err != nil {
			return req, rec, fmt.Errorf("messages.[%d]: %w", i, err)
		}
	}
	if len(d.open) > 0 {
		return req, rec, d.unanswered()
	}
	rec.System, rec.Messages = strings.Join(d.system, "\n"), d.out
	return req, rec, CheckPairs(rec.Messages)
}

func checkOpenAITop(req oRequest) error {
	switch {
	case req.Model == "":
		return fmt.Errorf("you must provide a model parameter")
	case len(req.Messages) == 0:
		return fmt.Errorf("messages: empty array; expected an array with minimum length 1")
	case req.StreamOptions != nil && !req.Stream:
		return fmt.Errorf("stream_options: the 'stream_options' parameter is only allowed when 'stream' is enabled")
	case req.MaxTokens != nil && req.MaxCompletionTokens != nil:
		return fmt.Errorf("max_tokens and max_completion_tokens cannot both be set")
	case req.MaxTokens != nil && *req.MaxTokens < 1, req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 1:
		return fmt.Errorf("max_tokens: must be at least 1")
	}
	return nil
}

func openAITools(tools []oTool) ([]llm.Tool, error) {
	var names []string
	var out []llm.Tool
	for i, t := range tools {
		if t.Type != "function" || t.Function == nil {
			return nil, fmt.Errorf("tools[%d]: llmtest serves type \"function\" tools with a function only", i)
		}
		if !validToolName(t.Function.Name) {
			return nil, fmt.Errorf("tools[%d].function.name: %q does not match ^[a-zA-Z0-9_-]{1,64}$", i, t.Function.Name)
		}
		if slices.Contains(names, t.Function.Name) {
			return nil, fmt.Errorf("tools: duplicate function name %q", t.Function.Name)
		}
		if len(t.Function.Parameters) > 0 {
			if err := checkSchema(t.Function.Parameters); err != nil {
				return nil, fmt.Errorf("tools[%d].function.parameters: %w", i, err)
			}
		}
		names = append(names, t.Function.Name)
		out = append(out, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	return out, nil
}

// oDecoder walks the messages in order.
type oDecoder struct {
	out    []llm.Message
	system []string
	// open holds the tool_call IDs of the last assistant message that no
	// tool message answered yet; inResults says the tail of out is the
	// user message collecting their results.
	open      []string
	inResults bool
}

func (d *oDecoder) message(m oMessage) error {
	if len(d.open) > 0 && m.Role != "tool" {
		return d.unanswered()
	}
	switch m.Role {
	case "system", "developer":
		text, err := textOnly(m.Content)
		d.system = append(d.system, text)
		return err
	case "user":
		return d.user(m)
	case "assistant":
		return d.assistant(m)
	case "tool":
		return d.tool(m)
	}
	return fmt.Errorf("role: %q is not one of system, developer, user, assistant, tool", m.Role)
}

func (d *oDecoder) unanswered() error {
	return fmt.Errorf("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
		strings.Join(d.open, ", "))
}

func (d *oDecoder) user(m oMessage) error {
	blocks, err := userParts(m.Content)
	if err != nil {
		return err
	}
	if d.inResults {
		tail := &d.out[len(d.out)-1]
		tail.Content = append(tail.Content, blocks...)
	} else {
		d.out = append(d.out, llm.Message{Role: llm.RoleUser, Content: blocks})
	}
	d.inResults = false
	return nil
}

func (d *oDecoder) assistant(m oMessage) error {
	msg := llm.Message{Role: llm.RoleAssistant}
	if len(m.Content) > 0 && string(m.Content) != "null" {
		text, err := textOnly(m.Content)
		if err != nil {
			return err
		}
		if text != "" {
			msg.Content = append(msg.Content, llm.Block{Type: llm.BlockText, Text: text})
		}
	} else if len(m.ToolCalls) == 0 {
		return fmt.Errorf("content: an assistant message needs content unless it has tool_calls")
	}
	d.open = nil
	for i, c := range m.ToolCalls {
		if c.ID == "" || c.Type != "function" || c.Function.Name == "" {
			return fmt.Errorf("tool_calls[%d]: id, type \"function\" and function.name are required", i)
		}
		if !json.Valid([]byte(c.Function.Arguments)) {
			return fmt.Errorf("tool_calls[%d].function.arguments: not valid JSON: %s", i, clip(c.Function.Arguments, 100))
		}
		msg.Content = append(msg.Content, llm.Block{Type: llm.BlockToolUse, ID: c.ID,
			Name: c.Function.Name, Input: json.RawMessage(c.Function.Arguments)})
		d.open = append(d.open, c.ID)
	}
	d.out = append(d.out, msg)
	d.inResults = false
	return nil
}

func (d *oDecoder) tool(m oMessage) error {
	i := slices.Index(d.open, m.ToolCallID)
	if m.ToolCallID == "" || i < 0 {
		return fmt.Errorf("invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", m.ToolCallID)
	}
	text, err := textOnly(m.Content)
	if err != nil {
		return fmt.Errorf("content: tool messages carry text only: %w", err)
	}
	d.open = slices.Delete(d.open, i, i+1)
	block := llm.Block{Type: llm.BlockToolResult, ID: m.ToolCallID, Text: text}
	if rest, ok := strings.CutPrefix(text, errorPrefix); ok {
		block.Text, block.IsError = rest, true
	}
	if !d.inResults {
		d.out = append(d.out, llm.Message{Role: llm.RoleUser})
	}
	tail := &d.out[len(d.out)-1]
	tail.Content = append(tail.Content, block)
	d.inResults = true
	return nil
}

// textOnly decodes content that may hold text only: a string or text parts.
func textOnly(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []oPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of text parts")
	}
	var texts []string
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("content[%d]: type %q where only text is allowed", i, p.Type)
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, ""), nil
}

// userParts decodes a user message's content: text and image_url parts.
func userParts(raw json.RawMessage) ([]llm.Block, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []llm.Block{{Type: llm.BlockText, Text: s}}, nil
	}
	var parts []oPart
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		return nil, fmt.Errorf("content: must be a string or a non-empty array of parts")
	}
	var out []llm.Block
	for i, p := range parts {
		switch {
		case p.Type == "text" && p.Text != nil:
			out = append(out, llm.Block{Type: llm.BlockText, Text: *p.Text})
		case p.Type == "image_url" && p.ImageURL != nil:
			img, err := dataURL(p.ImageURL.URL)
			if err != nil {
				return nil, fmt.Errorf("content[%d].image_url: %w", i, err)
			}
			out = append(out, llm.Block{Type: llm.BlockImage, Images: []llm.Image{img}})
		default:
			return nil, fmt.Errorf("content[%d]: llmtest serves text and image_url parts only, got %q", i, p.Type)
		}
	}
	return out, nil
}

// dataURL decodes a data:image/...;base64, URL.
func dataURL(u string) (llm.Image, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	meta, data, ok2 := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !ok2 || !isBase64 {
		return llm.Image{}, fmt.Errorf("llmtest serves base64 data URLs only, got %s", clip(u, 40))
	}
	if !validMediaTypes[mediaType] {
		return llm.Image{}, fmt.Errorf("unsupported image type %q", mediaType)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(raw) == 0 {
		return llm.Image{}, fmt.Errorf("invalid or empty base64 image data")
	}
	return llm.Image{MediaType: mediaType, Data: raw}, nil
}
