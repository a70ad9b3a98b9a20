"""Fixed names and values shared by the CRD, the operator and the tests: the API group,
version, kind and plural of a ParallelJob; the labels and finalizers the operator puts
on pods and jobs, and its value of spec.managedBy; batch/v1's condition types with the
reasons and messages upstream gives them (and the operator's PodCreationFailed); the pod
phases; the longest generateName the API server takes. A leaf: it imports nothing of the
package."""

from __future__ import annotations

from typing import Final

GROUP: Final = "paralleljob.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "ParallelJob"
PLURAL: Final = "paralleljobs"

#: Labels put on every pod of a ParallelJob (the job's name and its uid).
LABEL_JOB_NAME: Final = f"{GROUP}/job-name"
LABEL_CONTROLLER_UID: Final = f"{GROUP}/controller-uid"
#: A pod's deletion cost (an int32; lower goes first), as ReplicaSets honour it
#: (controller_utils.go ActivePodsWithRanks); a ParallelJob's scale-down does too.
POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"

#: The operator's own tracking finalizer, on the pods of ParallelJobs and of the Jobs
#: whose spec.managedBy names the operator (KEP-4368: an external controller must not use
#: upstream's batch.kubernetes.io/job-tracking).
TRACKING_FINALIZER: Final = f"{GROUP}/tracking"

#: batch/v1 Job: its API, the prefix of the labels and annotations on its pods, the
#: built-in controller's tracking finalizer and name (JobControllerName, the value an
#: unset spec.managedBy stands for).
JOB_GROUP: Final = "batch"
JOB_VERSION: Final = "v1"
JOB_KIND: Final = "Job"
JOB_PLURAL: Final = "jobs"
JOB_KEY_PREFIX: Final = "batch.kubernetes.io"
JOB_TRACKING_FINALIZER: Final = f"{JOB_KEY_PREFIX}/job-tracking"
BUILTIN_JOB_CONTROLLER: Final = "kubernetes.io/job-controller"

#: The value of spec.managedBy that names this operator (batch/v1 JobControllerName is
#: kubernetes.io/job-controller). A job without spec.managedBy is the operator's too;
#: one with any other value is left to that controller (managed_by.py).
MANAGED_BY: Final = f"{GROUP}/job-controller"

# Condition types (batch/v1 JobConditionType) and the reasons upstream uses.
COND_COMPLETE: Final = "Complete"
COND_FAILED: Final = "Failed"
COND_SUSPENDED: Final = "Suspended"
COND_FAILURE_TARGET: Final = "FailureTarget"
COND_SUCCESS_CRITERIA_MET: Final = "SuccessCriteriaMet"
#: Not upstream: True while the API server rejects the pods the job needs.
COND_POD_CREATION_FAILED: Final = "PodCreationFailed"

REASON_BACKOFF_LIMIT: Final = "BackoffLimitExceeded"
REASON_DEADLINE: Final = "DeadlineExceeded"
REASON_COMPLETIONS_REACHED: Final = "CompletionsReached"
REASON_MAX_FAILED_INDEXES_EXCEEDED: Final = "MaxFailedIndexesExceeded"
REASON_FAILED_INDEXES: Final = "FailedIndexes"
MSG_BACKOFF_LIMIT: Final = "Job has reached the specified backoff limit"
MSG_DEADLINE: Final = "Job was active longer than specified deadline"
MSG_COMPLETIONS_REACHED: Final = "Reached expected number of succeeded pods"

#: Not upstream (spec.podStartDeadlineSeconds): the pod condition the operator writes,
#: with the phase Failed, on a pod of the job that did not start in time, before it
#: deletes the pod; so that podFailurePolicy's onPodConditions can name it. A qualified
#: name with the operator's domain, as a condition that a component outside Kubernetes
#: adds to a pod should have (no clash with a later built-in type).
POD_COND_START_DEADLINE_EXCEEDED: Final = f"{GROUP}/PodStartDeadlineExceeded"
#: That condition's reason, and the reason of the Warning Event on the job.
REASON_POD_START_DEADLINE_EXCEEDED: Final = "PodStartDeadlineExceeded"

# Events: their types and every reason the operator gives one (client-go's EventTypeNormal
# and EventTypeWarning; the reasons upstream's Job and CronJob controllers use, and the
# operator's own).
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
REASON_SUCCESSFUL_CREATE: Final = "SuccessfulCreate"
REASON_FAILED_CREATE: Final = "FailedCreate"
REASON_SUCCESSFUL_DELETE: Final = "SuccessfulDelete"
REASON_FAILED_DELETE: Final = "FailedDelete"
REASON_COMPLETED: Final = "Completed"
REASON_SUSPENDED: Final = "Suspended"
REASON_RESUMED: Final = "Resumed"
REASON_TOO_MANY_SUCCEEDED_PODS: Final = "TooManySucceededPods"
#: Not upstream (spec.restartPolicy): a job-level restart.
REASON_RESTARTED: Final = "Restarted"
# A ParallelCronJob's (upstream's CronJob controller's, and its own).
REASON_SAW_COMPLETED_JOB: Final = "SawCompletedJob"
REASON_UNEXPECTED_JOB: Final = "UnexpectedJob"
REASON_MISSING_JOB: Final = "MissingJob"
REASON_JOB_ALREADY_ACTIVE: Final = "JobAlreadyActive"
REASON_TOO_MANY_ACTIVE: Final = "TooManyActive"
REASON_MISS_SCHEDULE: Final = "MissSchedule"
REASON_TOO_MANY_MISSED_TIMES: Final = "TooManyMissedTimes"
REASON_UNKNOWN_TIME_ZONE: Final = "UnknownTimeZone"
REASON_UNPARSEABLE_SCHEDULE: Final = "UnparseableSchedule"
REASON_INVALID_SCHEDULE: Final = "InvalidSchedule"
#: Not in the CronJob, whose API server refuses them: the condition a ParallelCronJob's
#: unusable schedule or time zone sets, and the reason it gives once usable again.
COND_INVALID_SCHEDULE: Final = "InvalidSchedule"
REASON_SCHEDULE_VALID: Final = "ScheduleValid"

# Pod phases.
PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
UNKNOWN: Final = "Unknown"

#: names.MaxGeneratedNameLength: the API server appends 5 random characters to a
#: generateName cut to this length (63, a DNS label, minus 5).
MAX_GENERATE_NAME_PREFIX: Final = 58

# --- the write fence (election/fence.py) ---------------------------------------------
#: ApiError.reason of a write the replica's own fence refused (never sent).
NOT_LEADING: Final = "NotLeading"
