package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentbox/agentbox/internal/llm"
)

type message = openai.ChatCompletionMessageParamUnion

// params converts req to the SDK's request. OpenAI's reasoning models
// refuse max_tokens and want max_completion_tokens, which OpenAI takes for
// every model; the servers behind a base URL know max_tokens.
func (m *Model) params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	var msgs []message
	if strings.TrimSpace(req.System) != "" {
		msgs = append(msgs, openai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		converted, err := convert(msg)
		if err != nil {
			return openai.ChatCompletionNewParams{}, fmt.Errorf("openai: %w: message %d: %w", llm.ErrBadRequest, i, err)
		}
		msgs = append(msgs, converted...)
	}
	tools, err := toolParams(req.Tools)
	if err != nil {
		return openai.ChatCompletionNewParams{}, fmt.Errorf("openai: %w: %w", llm.ErrBadRequest, err)
	}
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.Name), Messages: msgs, Tools: tools}
	n := openai.Int(int64(m.maxTokens(req)))
	if m.cfg.BaseURL == "" || reasoning(m.cfg.Name) {
		p.MaxCompletionTokens = n
	} else {
		p.MaxTokens = n
	}
	return p, nil
}

// reasoning reports whether name is one of OpenAI's reasoning models,
// also when a gateway serves it (openai/gpt-5).
func reasoning(name string) bool {
	name = strings.ToLower(name[strings.LastIndex(name, "/")+1:])
	for _, p := range []string{"gpt-5", "o1", "o3", "o4"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// maxTokens is the request's output limit, capped at the model's.
func (m *Model) maxTokens(req llm.Request) int {
	if req.MaxTokens > 0 && req.MaxTokens < m.info.MaxOutputTokens {
		return req.MaxTokens
	}
	return m.info.MaxOutputTokens
}

// convert turns one message into the Chat Completions messages it needs.
func convert(m llm.Message) ([]message, error) {
	if m.Role == llm.RoleAssistant {
		msg, ok, err := assistant(m)
		if !ok || err != nil {
			return nil, err
		}
		return []message{msg}, nil
	}
	return user(m), nil
}

// assistant converts the model's own message: its text and tool calls.
func assistant(m llm.Message) (message, bool, error) {
	var a openai.ChatCompletionAssistantMessageParam
	if text := m.PlainText(); strings.TrimSpace(text) != "" {
		a.Content.OfString = openai.String(text)
	}
	for _, b := range m.ToolUses() {
		args := string(b.Input)
		if len(b.Input) == 0 {
			args = "{}"
		} else if !json.Valid(b.Input) {
			return message{}, false, fmt.Errorf("tool call %s: input is not valid JSON", b.ID)
		}
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       b.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
			},
		})
	}
	if a.Content.OfString.Valid() || len(a.ToolCalls) > 0 {
		return message{OfAssistant: &a}, true, nil
	}
	return message{}, false, nil
}

// user converts a user message: a tool message per tool result, in order
// (they must directly follow the calls), then one user message with the
// text, the images and the images of the tool results.
func user(m llm.Message) []message {
	var out []message
	var parts []openai.ChatCompletionContentPartUnionParam
	hasImage := false
	for _, b := range m.Content {
		switch b.Type {
		case llm.BlockToolResult:
			text := b.Text
			if b.IsError {
				text = ErrorPrefix + text
			}
			out = append(out, openai.ToolMessage(text, b.ID))
			if len(b.Images) > 0 {
				parts = append(parts, textPart(fmt.Sprintf("Images returned by tool call %s:", b.ID)))
				parts = append(parts, imageParts(b.Images)...)
				hasImage = true
			}
		case llm.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				parts = append(parts, textPart(b.Text))
			}
		case llm.BlockImage:
			parts = append(parts, imageParts(b.Images)...)
			hasImage = true
		}
	}
	switch {
	case len(parts) == 0:
		return out
	case !hasImage:
		// Plain text as a string: the form every compatible server reads.
		return append(out, openai.UserMessage(joinText(parts)))
	}
	return append(out, openai.UserMessage(parts))
}

func textPart(s string) openai.ChatCompletionContentPartUnionParam {
	return openai.TextContentPart(s)
}

func imageParts(imgs []llm.Image) []openai.ChatCompletionContentPartUnionParam {
	var out []openai.ChatCompletionContentPartUnionParam
	for _, img := range imgs {
		url := "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		out = append(out, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
	}
	return out
}

func joinText(parts []openai.ChatCompletionContentPartUnionParam) string {
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.OfText != nil {
			texts = append(texts, p.OfText.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// toolParams converts the tool definitions to functions.
func toolParams(in []llm.Tool) ([]openai.ChatCompletionToolUnionParam, error) {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(in))
	for _, t := range in {
		schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.InputSchema) > 0 {
			schema = nil
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
				return nil, fmt.Errorf("tool %s: input schema is not a JSON object", t.Name)
			}
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}
