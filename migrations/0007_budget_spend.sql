CREATE TABLE `budget_spend` (
	`run_id` text NOT NULL,
	`budget` text NOT NULL,
	`window_index` integer NOT NULL,
	`spent` integer NOT NULL,
	PRIMARY KEY(`run_id`, `budget`, `window_index`)
);
