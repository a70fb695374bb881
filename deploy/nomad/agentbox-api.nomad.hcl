# agentbox-api: the API replicas (`agentbox serve --role api`): REST, event
# streams and the UI, answered from the shared PostgreSQL store. Stateless
# but for a per-allocation data dir; run as many as you like behind one
# address (a load balancer in front of the "agentbox-api" service).
#
# Secrets come from the Nomad variable nomad/jobs/agentbox-api (readable by
# this job's tasks without an ACL policy); every key becomes an environment
# variable of the task:
#
#   nomad var put nomad/jobs/agentbox-api \
#     AGENTBOX_STORE=postgres://agentbox:PW@db.internal:5432/agentbox \
#     AGENTBOX_TOKEN=$(head -c 32 /dev/urandom | base64) \
#     AGENTBOX_CLUSTER_SECRET=$secret \
#     AGENTBOX_VIEWER_KEY=$(head -c 32 /dev/urandom | base64)
#
# AGENTBOX_VIEWER_KEY is written to a 0600 file in the task's secrets dir
# (AGENTBOX_VIEWER_KEY_FILE) so every replica signs viewer links alike.
#
# raw_exec runs agentbox from the host's file system (agentbox_bin); see
# docs/deploy.md for why not the docker driver.

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "count" {
  type    = number
  default = 2
}

variable "agentbox_bin" {
  description = "path of the agentbox binary on every client node"
  type        = string
  default     = "/usr/local/bin/agentbox"
}

variable "port" {
  description = "static port of each replica; 0 for a dynamic one"
  type        = number
  default     = 0
}

variable "public_url" {
  description = "AGENTBOX_PUBLIC_URL, where clients reach the replicas (the load balancer), or empty"
  type        = string
  default     = ""
}

job "agentbox-api" {
  datacenters = var.datacenters
  type        = "service"

  group "api" {
    count = var.count

    network {
      port "http" {
        static = var.port
      }
    }

    service {
      name     = "agentbox-api"
      provider = "nomad"
      port     = "http"

      check {
        type     = "http"
        path     = "/healthz"
        interval = "5s"
        timeout  = "2s"
      }
    }

    # Two replicas on one node are fine (each has its own data dir and port);
    # spread them when there are several.
    spread {
      attribute = "${node.unique.id}"
    }

    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    update {
      max_parallel     = 1
      min_healthy_time = "5s"
      healthy_deadline = "2m"
      auto_revert      = true
    }

    task "api" {
      driver = "raw_exec"

      config {
        command = var.agentbox_bin
        args = [
          "serve", "--role", "api",
          "--addr", "${NOMAD_ADDR_http}",
          # The token, viewer.key and serve.lock of this replica only.
          "--data-dir", "${NOMAD_ALLOC_DIR}/data",
        ]
      }

      env {
        AGENTBOX_ROLE            = "api"
        AGENTBOX_PUBLIC_URL      = var.public_url
        AGENTBOX_VIEWER_KEY_FILE = "${NOMAD_SECRETS_DIR}/viewer.key"
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/agentbox.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
        {{- with nomadVar "nomad/jobs/agentbox-api" }}{{ range .Tuples }}
        {{- if ne .K "AGENTBOX_VIEWER_KEY" }}
        {{ .K }}={{ .V | toJSON }}
        {{- end }}{{ end }}{{ end }}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/viewer.key"
        perms       = "0600"
        change_mode = "restart"
        data        = <<-EOT
        {{- with nomadVar "nomad/jobs/agentbox-api" }}{{ .AGENTBOX_VIEWER_KEY }}{{ end -}}
        EOT
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
