CREATE TABLE `memory_documents` (
	`id` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`instance_id` text NOT NULL,
	`kind` text NOT NULL,
	`step` integer NOT NULL,
	`subject` text,
	`text` text NOT NULL,
	`data` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `memory_run_instance_kind_step_idx` ON `memory_documents` (`run_id`,`instance_id`,`kind`,`step`);