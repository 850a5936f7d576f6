{{/* Chart name, truncated to a DNS label. */}}
{{- define "multicloud-ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name, or release-chart when they differ. */}}
{{- define "multicloud-ccm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "multicloud-ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "multicloud-ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "multicloud-ccm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "multicloud-ccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/part-of: multicloud-ccm
{{- end -}}

{{- define "multicloud-ccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "multicloud-ccm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name the ServiceAccount the CCM runs as" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "multicloud-ccm.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The cloud-config Secret's name and key. */}}
{{- define "multicloud-ccm.configSecretName" -}}
{{- if .Values.existingConfigSecret.name -}}
{{- .Values.existingConfigSecret.name -}}
{{- else -}}
{{- printf "%s-config" (include "multicloud-ccm.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "multicloud-ccm.configSecretKey" -}}
{{- if .Values.existingConfigSecret.name -}}
{{- .Values.existingConfigSecret.key -}}
{{- else -}}
cloud-config.yaml
{{- end -}}
{{- end -}}

{{/* "true" when more than one CCM pod can run at the same time. */}}
{{- define "multicloud-ccm.manyPods" -}}
{{- if eq .Values.kind "DaemonSet" -}}
true
{{- else if gt (int .Values.replicaCount) 1 -}}
true
{{- else if ne (dig "type" "RollingUpdate" .Values.updateStrategy) "Recreate" -}}
true
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/* "true" or "false": whether --leader-elect is on. */}}
{{- define "multicloud-ccm.leaderElect" -}}
{{- $many := include "multicloud-ccm.manyPods" . -}}
{{- $want := .Values.leaderElection.enabled -}}
{{- if eq (toString $want) "auto" -}}
{{- $many -}}
{{- else if $want -}}
true
{{- else if eq $many "true" -}}
{{- fail "leaderElection.enabled=false, but more than one CCM pod can run at once (a DaemonSet, replicaCount > 1 or a RollingUpdate strategy): two leaders would fight over every Node and load balancer. Use leaderElection.enabled=auto, or kind=Deployment, replicaCount=1 and updateStrategy.type=Recreate." -}}
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/* Flags the chart owns; args may not set them. */}}
{{- define "multicloud-ccm.managedFlags" -}}
cloud-provider: "set by the chart (multicloud)"
cloud-config: "set by the chart from config or existingConfigSecret"
secure-port: "use securePort"
leader-elect: "use leaderElection.enabled"
leader-elect-resource-namespace: "use leaderElection.namespace"
leader-elect-resource-name: "use leaderElection.leaseName"
tls-cert-file: "use tls.secretName"
tls-private-key-file: "use tls.secretName"
{{- end -}}

{{/* The effective value of a boolean CCM flag in args ("true"/"false"), with
     the binary's default when it is absent. Call with (list $ "flag" "default"). */}}
{{- define "multicloud-ccm.flagBool" -}}
{{- $root := index . 0 -}}
{{- $flag := index . 1 -}}
{{- $v := index $root.Values.args $flag -}}
{{- if kindIs "invalid" $v -}}
{{- index . 2 -}}
{{- else -}}
{{- toString $v -}}
{{- end -}}
{{- end -}}

{{/* The container's arguments, one YAML list item per line. */}}
{{- define "multicloud-ccm.args" -}}
{{- $managed := include "multicloud-ccm.managedFlags" . | fromYaml -}}
- --cloud-provider=multicloud
- --cloud-config=/etc/multicloud-ccm/config/cloud-config.yaml
- --secure-port={{ .Values.securePort }}
- --leader-elect={{ include "multicloud-ccm.leaderElect" . }}
{{- if eq (include "multicloud-ccm.leaderElect" .) "true" }}
- --leader-elect-resource-namespace={{ .Values.leaderElection.namespace }}
- --leader-elect-resource-name={{ .Values.leaderElection.leaseName }}
{{- end }}
{{- if .Values.tls.secretName }}
- --tls-cert-file=/etc/multicloud-ccm/tls/tls.crt
- --tls-private-key-file=/etc/multicloud-ccm/tls/tls.key
{{- end }}
{{- range $flag, $value := .Values.args }}
{{- if hasKey $managed $flag }}
{{- fail (printf "args.%s cannot be set: %s" $flag (index $managed $flag)) }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9][a-z0-9-]*$" $flag) }}
{{- fail (printf "args.%s: a flag name is lowercase letters, digits and dashes, without the leading --" $flag) }}
{{- end }}
{{- if kindIs "invalid" $value }}
{{- /* null drops the flag */ -}}
{{- else if kindIs "slice" $value }}
- {{ printf "--%s=%s" $flag (join "," $value) | quote }}
{{- else if kindIs "map" $value }}
{{- fail (printf "args.%s: a flag's value is a string, number, boolean or list, not a map" $flag) }}
{{- else if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
- {{ printf "--%s=%s" $flag (toString (int64 $value)) | quote }}
{{- else }}
- {{ printf "--%s=%s" $flag (toString $value) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secret holding Prometheus's bearer token for the ServiceMonitor. */}}
{{- define "multicloud-ccm.metricsTokenSecret" -}}
{{- default (printf "%s-metrics-reader" (include "multicloud-ccm.fullname" .)) .Values.metrics.serviceMonitor.authorization.secretName -}}
{{- end -}}

{{/* The backends with load balancers, sorted and comma-separated (the router's
messages list them so): admissionPolicy.backends,
else those of `config` that offer load balancers (aws; openstack unless
loadBalancer.enabled is false; baremetal with addressPools); empty with an
existing cloud-config Secret (names not checked then). */}}
{{- define "multicloud-ccm.lbBackends" -}}
{{- $names := list -}}
{{- if .Values.admissionPolicy.backends -}}
{{- $names = .Values.admissionPolicy.backends -}}
{{- else if not .Values.existingConfigSecret.name -}}
{{- range (.Values.config.backends | default list) -}}
{{- $settings := get . (.type | default "") | default dict -}}
{{- if eq .type "aws" -}}
{{- $names = append $names .name -}}
{{- else if and (eq .type "openstack") (ne (dig "loadBalancer" "enabled" true $settings) false) -}}
{{- $names = append $names .name -}}
{{- else if and (eq .type "baremetal") $settings.addressPools -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," (sortAlpha $names) -}}
{{- end -}}

{{/* "true" when a bare-metal backend announces through kube-vip: one of
`config` has announce: kube-vip, or admissionPolicy.kubeVIP is set. */}}
{{- define "multicloud-ccm.kubeVIP" -}}
{{- $on := .Values.admissionPolicy.kubeVIP | default false -}}
{{- if not .Values.existingConfigSecret.name -}}
{{- range (.Values.config.backends | default list) -}}
{{- $settings := get . (.type | default "") | default dict -}}
{{- if and (eq .type "baremetal") (eq ($settings.announce | default "") "kube-vip") -}}
{{- $on = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- ternary "true" "false" $on -}}
{{- end -}}

{{/* The load-balancer classes of `config` (loadBalancer.classes[].name), comma-separated. */}}
{{- define "multicloud-ccm.lbClasses" -}}
{{- $names := list -}}
{{- range (dig "loadBalancer" "classes" list (.Values.config | default dict)) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}
