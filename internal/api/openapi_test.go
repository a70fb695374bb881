package api

import (
	"encoding/json"
	"maps"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/wire"
)

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var d openAPIDoc
	if err := json.Unmarshal(OpenAPI(), &d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", d.OpenAPI)
	}
	return d
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPIRoutesMatchTheMux: every route registered on the mux is in the
// document and every documented operation is served by exactly that route.
func TestOpenAPIRoutesMatchTheMux(t *testing.T) {
	d := loadDoc(t)
	s := New(Config{NoAuth: true}, nil, nil, nil).(*server)
	var registered, documented []string
	for _, rt := range s.routes() {
		registered = append(registered, strings.Replace(rt.pattern, "{path...}", "{path}", 1))
	}
	for p, ops := range d.Paths {
		for m := range ops {
			if slices.Contains(httpMethods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	if !slices.Equal(registered, documented) {
		t.Errorf("routes differ:\n mux: %v\n doc: %v", registered, documented)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, op := range documented {
		method, p, _ := strings.Cut(op, " ")
		r := httptest.NewRequest(method, param.ReplaceAllString(p, "x1"), nil)
		if _, pattern := s.mux.Handler(r); strings.Replace(pattern, "{path...}", "{path}", 1) != op {
			t.Errorf("%s is served by pattern %q", op, pattern)
		}
	}
}

// TestOpenAPISchemasMatchDTOs: each DTO's (package wire's types) JSON field
// names are its schema's properties, and the fields always present are the
// schema's required ones.
func TestOpenAPISchemasMatchDTOs(t *testing.T) {
	d := loadDoc(t)
	dtos := map[string]reflect.Type{
		"SubmitRequest": reflect.TypeFor[wire.SubmitRequest](), "Limits": reflect.TypeFor[wire.Limits](),
		"SubmitResponse": reflect.TypeFor[wire.SubmitResponse](), "Links": reflect.TypeFor[wire.Links](),
		"Job": reflect.TypeFor[wire.Job](), "Usage": reflect.TypeFor[wire.Usage](), "JobList": reflect.TypeFor[wire.JobList](),
		"Event": reflect.TypeFor[wire.Event](), "EventPage": reflect.TypeFor[wire.EventPage](),
		"ErrorResponse": reflect.TypeFor[wire.ErrorResponse](), "ErrorDetail": reflect.TypeFor[wire.ErrorDetail](), "FieldProblem": reflect.TypeFor[wire.FieldProblem](),
		"LegacySubmitResponse": reflect.TypeFor[wire.LegacySubmitResponse](), "LegacyStatus": reflect.TypeFor[wire.LegacyStatus](),
		"Health": reflect.TypeFor[wire.Health](), "ViewerLinks": reflect.TypeFor[wire.ViewerLinks](),
		"Repo": reflect.TypeFor[wire.Repo](), "PullRequest": reflect.TypeFor[wire.PullRequest](),
		"Git": reflect.TypeFor[wire.Git](), "MessageRequest": reflect.TypeFor[wire.MessageRequest](),
		"Worker": reflect.TypeFor[wire.Worker](), "WorkerList": reflect.TypeFor[wire.WorkerList](),
		"Policy": reflect.TypeFor[egress.Policy](), "NetworkSummary": reflect.TypeFor[wire.NetworkSummary](),
		"NetworkHost": reflect.TypeFor[wire.NetworkHost](), "Effective": reflect.TypeFor[wire.Effective](),
		"FileList": reflect.TypeFor[wire.FileList](), "FileEntry": reflect.TypeFor[wire.FileEntry](),
	}
	maps.Copy(dtos, eventSchemas())
	notDTOs := []string{"Status"} // an enum, not a struct
	for name, schema := range d.Components.Schemas {
		typ, ok := dtos[name]
		if !ok {
			if !slices.Contains(notDTOs, name) {
				t.Errorf("schema %s has no DTO", name)
			}
			continue
		}
		all, required := jsonFields(typ)
		if props := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(props, all) {
			t.Errorf("%s: schema properties %v, DTO fields %v", name, props, all)
		}
		if req := slices.Sorted(slices.Values(schema.Required)); !slices.Equal(req, required) {
			t.Errorf("%s: schema requires %v, DTO always sends %v", name, req, required)
		}
	}
	for name := range dtos {
		if _, ok := d.Components.Schemas[name]; !ok {
			t.Errorf("DTO %s has no schema", name)
		}
	}
}

// eventSchemas maps the schema of each event payload, and of the types
// payloads hold, to its Go type: package event's struct for type X is
// the schema XPayload.
func eventSchemas() map[string]reflect.Type {
	m := map[string]reflect.Type{
		"Message": reflect.TypeFor[llm.Message](), "Block": reflect.TypeFor[llm.Block](),
		"Image": reflect.TypeFor[llm.Image](), "ModelUsage": reflect.TypeFor[llm.Usage](),
		"ContextState": reflect.TypeFor[memory.State](),
	}
	for _, p := range event.Types() {
		t := reflect.TypeOf(p)
		m[t.Name()+"Payload"] = t
	}
	return m
}

// TestOpenAPIEventPayloads: the Event schema's allOf gives every event type
// its payload's schema, and only those.
func TestOpenAPIEventPayloads(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Event struct {
					AllOf []struct {
						If struct {
							Properties struct {
								Type struct {
									Const string `json:"const"`
								} `json:"type"`
							} `json:"properties"`
						} `json:"if"`
						Then struct {
							Properties struct {
								Payload struct {
									Ref string `json:"$ref"`
								} `json:"payload"`
							} `json:"properties"`
						} `json:"then"`
					} `json:"allOf"`
				} `json:"Event"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, c := range doc.Components.Schemas.Event.AllOf {
		documented[c.If.Properties.Type.Const] = c.Then.Properties.Payload.Ref
	}
	want := map[string]string{}
	for _, p := range event.Types() {
		want[p.EventType()] = "#/components/schemas/" + reflect.TypeOf(p).Name() + "Payload"
	}
	if !maps.Equal(documented, want) {
		t.Errorf("Event payload schemas by type:\n doc:  %v\n want: %v", documented, want)
	}
}

// jsonFields returns a struct's JSON names, all and those never omitted.
func jsonFields(t reflect.Type) (all, required []string) {
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

// TestOpenAPIRefsResolve: every $ref points at a component that exists.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`"\$ref":\s*"#/components/(\w+)/(\w+)"`).FindAllStringSubmatch(string(OpenAPI()), -1)
	if len(refs) == 0 {
		t.Fatal("no $refs found")
	}
	comps := doc["components"].(map[string]any)
	for _, m := range refs {
		kind, _ := comps[m[1]].(map[string]any)
		if _, ok := kind[m[2]]; !ok {
			t.Errorf("$ref #/components/%s/%s does not resolve", m[1], m[2])
		}
	}
}

// TestOpenAPIErrorCodes: the document lists exactly the codes the API uses.
func TestOpenAPIErrorCodes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorDetail struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"ErrorDetail"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	codes := []string{wire.CodeBadRequest, wire.CodeUnauthorized, wire.CodeForbidden, wire.CodeNotFound, wire.CodeMethodNotAllowed,
		wire.CodeNotEnded, wire.CodeAlreadyEnded, wire.CodeTooLarge, wire.CodeValidation, wire.CodeIdempotencyConflict, wire.CodeInternal,
		wire.CodeNoSandbox, wire.CodeBadGateway, wire.CodeUnavailable, wire.CodeDeleted, wire.CodeOverCeiling, wire.CodeImageNotAllowed, wire.CodeIsolation,
		wire.CodeRequestTimeout, wire.CodeNoModel}
	got := doc.Components.Schemas.ErrorDetail.Properties.Code.Enum
	slices.Sort(codes)
	slices.Sort(got)
	if !slices.Equal(got, codes) {
		t.Errorf("documented codes %v, API codes %v", got, codes)
	}
}
