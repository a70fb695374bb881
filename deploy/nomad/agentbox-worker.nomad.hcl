# agentbox-worker: one worker (`agentbox serve --role worker`) on every
# client node (a system job). It claims jobs from the shared PostgreSQL
# store and runs their sandboxes on the node's own container engine, and
# serves the cluster's internal endpoint on a port the API replicas reach
# (AGENTBOX_ADVERTISE_ADDR: the node's address and the allocated port).
#
# Secrets and settings come from the Nomad variable
# nomad/jobs/agentbox-worker; every key becomes an environment variable:
#
#   nomad var put nomad/jobs/agentbox-worker \
#     AGENTBOX_STORE=postgres://agentbox:PW@db.internal:5432/agentbox \
#     AGENTBOX_CLUSTER_SECRET=$secret \
#     ANTHROPIC_API_KEY=sk-ant-...
#
# The task is raw_exec: agentbox talks to the node's engine through its
# socket (docker_host), creates sandboxes next to the task rather than in
# it, and bind-mounts its own binary and the data dir's workspaces into
# them, which needs host paths; see docs/deploy.md.

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "agentbox_bin" {
  description = "path of the agentbox binary on every client node (static: CGO_ENABLED=0)"
  type        = string
  default     = "/usr/local/bin/agentbox"
}

variable "data_dir" {
  description = "the worker's data dir on the node: workspaces, sandbox state, its worker ID (keep it short: sandbox socket paths must fit in 107 bytes)"
  type        = string
  default     = "/var/lib/agentbox"
}

variable "docker_host" {
  description = "the engine's socket on the node (Podman: unix:///run/podman/podman.sock)"
  type        = string
  default     = "unix:///var/run/docker.sock"
}

variable "concurrency" {
  type    = number
  default = 2
}

variable "agent" {
  description = "AGENTBOX_AGENT: model, or shell (tests)"
  type        = string
  default     = "model"
}

variable "image" {
  description = "AGENTBOX_IMAGE, the sandbox image; it must be on every node (agentbox image build): nothing is pulled"
  type        = string
  default     = "agentbox-sandbox:latest"
}

variable "instance" {
  description = "AGENTBOX_INSTANCE, the label on this installation's sandboxes"
  type        = string
  default     = "default"
}

variable "port" {
  description = "static port of the internal endpoint; 0 for a dynamic one"
  type        = number
  default     = 0
}

job "agentbox-worker" {
  datacenters = var.datacenters
  type        = "system"

  # Only nodes with a container engine can run sandboxes.
  constraint {
    attribute = "${attr.driver.docker}"
    value     = "1"
  }

  group "worker" {
    network {
      port "internal" {
        static = var.port
      }
    }

    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    task "worker" {
      driver = "raw_exec"

      config {
        command = var.agentbox_bin
        args = [
          "serve", "--role", "worker",
          "--addr", "${NOMAD_ADDR_internal}",
          "--data-dir", var.data_dir,
          "--concurrency", "${var.concurrency}",
        ]
      }

      env {
        AGENTBOX_ROLE           = "worker"
        AGENTBOX_ADVERTISE_ADDR = "${NOMAD_ADDR_internal}"
        AGENTBOX_AGENT          = var.agent
        AGENTBOX_IMAGE          = var.image
        AGENTBOX_INSTANCE       = var.instance
        DOCKER_HOST             = var.docker_host
        AGENTBOX_GRACE          = "25s"
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/agentbox.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
        {{- with nomadVar "nomad/jobs/agentbox-worker" }}{{ range .Tuples }}
        {{ .K }}={{ .V | toJSON }}
        {{- end }}{{ end }}
        EOT
      }

      # On stop the worker lets running jobs finish for AGENTBOX_GRACE, then
      # hands them back pending for another worker: give it that long (30s is
      # the client's default max_kill_timeout).
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
