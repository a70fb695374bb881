package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/agentbox/agentbox/internal/llm"
)

// params converts req to the SDK's request. Prompt caching: the system
// prompt, the last tool and the last message each end a cache breakpoint
// (3 of the 4 allowed), so that every turn of an agent re-reads the prefix
// the turn before wrote.
func (m *Model) params(req llm.Request) (anthropic.MessageNewParams, error) {
	msgs, err := messages(req.Messages)
	if err != nil {
		return anthropic.MessageNewParams{}, fmt.Errorf("anthropic: %w: %w", llm.ErrBadRequest, err)
	}
	tools, err := toolParams(req.Tools, m.info.NativeComputerUse)
	if err != nil {
		return anthropic.MessageNewParams{}, fmt.Errorf("anthropic: %w: %w", llm.ErrBadRequest, err)
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.cfg.Name),
		MaxTokens: int64(m.maxTokens(req)),
		Messages:  msgs,
		Tools:     tools,
	}
	if strings.TrimSpace(req.System) != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	if n := len(msgs); n > 0 {
		last := msgs[n-1].Content
		if cc := last[len(last)-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	return p, nil
}

// maxTokens is the request's output limit, capped at the model's.
func (m *Model) maxTokens(req llm.Request) int {
	if req.MaxTokens > 0 && req.MaxTokens < m.info.MaxOutputTokens {
		return req.MaxTokens
	}
	return m.info.MaxOutputTokens
}

// messages converts the conversation. Messages left empty (only blank
// text) are dropped: the API rejects empty content.
func messages(in []llm.Message) ([]anthropic.MessageParam, error) {
	out := make([]anthropic.MessageParam, 0, len(in))
	for i, m := range in {
		blocks, err := contentBlocks(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		out = append(out, anthropic.MessageParam{Role: anthropic.MessageParamRole(m.Role), Content: blocks})
	}
	return out, nil
}

// contentBlocks converts a message's blocks, tool results first: the API
// wants a message answering tool calls to begin with its results.
func contentBlocks(m llm.Message) ([]anthropic.ContentBlockParamUnion, error) {
	var results, rest []anthropic.ContentBlockParamUnion
	for j, b := range m.Content {
		switch b.Type {
		case llm.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				rest = append(rest, anthropic.NewTextBlock(b.Text))
			}
		case llm.BlockImage:
			rest = append(rest, images(b.Images)...)
		case llm.BlockToolUse:
			input, err := toolInput(b.Input)
			if err != nil {
				return nil, fmt.Errorf("block %d (tool_use %s): %w", j, b.Name, err)
			}
			rest = append(rest, anthropic.NewToolUseBlock(b.ID, input, b.Name))
		case llm.BlockToolResult:
			results = append(results, toolResult(b))
		default:
			return nil, fmt.Errorf("block %d: unknown block type %q", j, b.Type)
		}
	}
	return append(results, rest...), nil
}

func images(imgs []llm.Image) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, img := range imgs {
		out = append(out, anthropic.NewImageBlockBase64(img.MediaType, base64.StdEncoding.EncodeToString(img.Data)))
	}
	return out
}

// toolInput is a tool call's arguments as sent back: a JSON object.
func toolInput(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("input is not valid JSON")
	}
	return raw, nil
}

// toolResult converts a result with its text and images.
func toolResult(b llm.Block) anthropic.ContentBlockParamUnion {
	r := anthropic.ToolResultBlockParam{ToolUseID: b.ID}
	if b.IsError {
		r.IsError = anthropic.Bool(true)
	}
	if strings.TrimSpace(b.Text) != "" {
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: b.Text}})
	}
	for _, img := range b.Images {
		src := anthropic.Base64ImageSourceParam{
			Data:      base64.StdEncoding.EncodeToString(img.Data),
			MediaType: anthropic.Base64ImageSourceMediaType(img.MediaType),
		}
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{
			OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &src}},
		})
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &r}
}

// toolParams converts the tool definitions; the last one carries the
// tools' cache breakpoint. With native, a computer tool is sent as
// Anthropic's computer-use tool, which needs the beta of betas.
func toolParams(in []llm.Tool, native bool) ([]anthropic.ToolUnionParam, error) {
	out := make([]anthropic.ToolUnionParam, 0, len(in))
	for i, t := range in {
		last := i == len(in)-1
		if native && isComputer(t) {
			out = append(out, computerTool(t, last))
			continue
		}
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		p := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			p.Description = anthropic.String(t.Description)
		}
		if last {
			p.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &p})
	}
	return out, nil
}

// Anthropic's computer-use tool: its type, the name the API requires, and
// the beta that enables it.
const (
	computerToolType = "computer_20250124"
	computerToolName = "computer"
	computerUseBeta  = "computer-use-2025-01-24"
)

// isComputer reports whether t can be sent as the native computer tool:
// the API wants it named "computer" and the display's size.
func isComputer(t llm.Tool) bool {
	n := t.Native
	return n != nil && n.Kind == llm.NativeKindComputer && t.Name == computerToolName &&
		n.DisplayWidth > 0 && n.DisplayHeight > 0
}

// computerTool is t in the native form. The SDK's ToolUnionParam has no
// variant for it (it lives in the beta API's types), so the union is
// overridden with the tool's JSON as the API documents it.
func computerTool(t llm.Tool, last bool) anthropic.ToolUnionParam {
	tool := map[string]any{
		"type":              computerToolType,
		"name":              computerToolName,
		"display_width_px":  t.Native.DisplayWidth,
		"display_height_px": t.Native.DisplayHeight,
	}
	if t.Native.DisplayNumber > 0 {
		tool["display_number"] = t.Native.DisplayNumber
	}
	if last {
		tool["cache_control"] = map[string]string{"type": "ephemeral"}
	}
	return param.Override[anthropic.ToolUnionParam](tool)
}

// betas are the beta features a request of tools needs, for the
// anthropic-beta header.
func betas(tools []llm.Tool, native bool) []string {
	if native && slices.ContainsFunc(tools, isComputer) {
		return []string{computerUseBeta}
	}
	return nil
}

// inputSchema carries a JSON Schema object over whole: properties and
// required in their fields, every other keyword as an extra field.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return s, fmt.Errorf("input schema is not a JSON object")
	}
	s.Properties = m["properties"]
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		if k != "type" && k != "properties" && k != "required" {
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}
